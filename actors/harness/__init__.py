"""The harness for any MCP server: ``mcp-actors bench``, the isolation check, and their parts.

Needs the ``harness`` extra (the MCP SDK, rich, hdrhistogram, Hypothesis);
``import actors`` never imports it. A `Target` hands out opened SDK client
sessions of a server (`StdioTarget`: a command per session; `HttpTarget`: a
Streamable HTTP URL; `serve_module_http`: this project serving modules over
HTTP; `serve_module_in_process`: in this process), each speaking its `Era`:
``"2026"`` (2026-07-28, no protocol session; `DEFAULT_ERA`, as the SDK's client)
or ``"2025"`` (the initialize handshake); a `Mix` says which tools to call with
which arguments; `run_load` puts a `LoadPlan`'s load on a target and returns a
`LoadResult`, which `print_report` shows and `write_json` saves. `Handles` drives
a server of the handle pattern: each session mints a handle that its calls carry.

`check_isolation` drives a server's sessions (a `Target`'s ``session``, or any
factory of SDK client sessions) to write watermarks only they could know, and
reports any session that sees another's, or loses its own (Hypothesis shrinks
the sequence that shows it). A server that stops answering is no verdict
(`NoVerdict`, or `NoAnswer` from a target or a load run), within the `Timeouts`.
"""

from ._cpu import MachineLoad as MachineLoad
from ._cpu import client_cpu_seconds as client_cpu_seconds
from ._cpu import process_cpu_seconds as process_cpu_seconds
from ._cpu import tree_cpu_seconds as tree_cpu_seconds
from ._eras import DEFAULT_ERA as DEFAULT_ERA
from ._eras import ERAS as ERAS
from ._eras import Era as Era
from ._handles import HandleError as HandleError
from ._handles import Handles as Handles
from ._isolation import Budget as Budget
from ._isolation import IsolationCheckError as IsolationCheckError
from ._isolation import IsolationReport as IsolationReport
from ._isolation import Leak as Leak
from ._isolation import LostWrite as LostWrite
from ._isolation import NoVerdict as NoVerdict
from ._isolation import Timeouts as Timeouts
from ._isolation import ToolCall as ToolCall
from ._isolation_check import check_isolation as check_isolation
from ._load import LATE_AFTER as LATE_AFTER
from ._load import Latency as Latency
from ._load import LoadPlan as LoadPlan
from ._load import LoadResult as LoadResult
from ._load import error_kind as error_kind
from ._load import open_sessions as open_sessions
from ._load import run_load as run_load
from ._mix import PLACEHOLDERS as PLACEHOLDERS
from ._mix import Mix as Mix
from ._mix import MixCall as MixCall
from ._mix import MixError as MixError
from ._mix import load_mix as load_mix
from ._mix import one_tool_mix as one_tool_mix
from ._report import JSON_FORMAT as JSON_FORMAT
from ._report import print_report as print_report
from ._report import to_json as to_json
from ._report import write_json as write_json
from ._targets import HttpTarget as HttpTarget
from ._targets import InProcessTarget as InProcessTarget
from ._targets import NoAnswer as NoAnswer
from ._targets import StdioTarget as StdioTarget
from ._targets import Target as Target
from ._targets import TargetError as TargetError
from ._targets import serve_command as serve_command
from ._targets import serve_module_http as serve_module_http
from ._targets import serve_module_in_process as serve_module_in_process
