"""The harness for anyone's MCP server: an isolation check of its sessions.

`check_isolation` drives a server through the official SDK's client with sessions
that write watermarks only they could know, and reports any session that sees
another's (Hypothesis shrinks the sequence that shows it). Needs the ``bench`` extra.
"""

from ._isolation import Budget as Budget
from ._isolation import IsolationCheckError as IsolationCheckError
from ._isolation import IsolationReport as IsolationReport
from ._isolation import Leak as Leak
from ._isolation import LostWrite as LostWrite
from ._isolation import ToolCall as ToolCall
from ._isolation import check_isolation as check_isolation
