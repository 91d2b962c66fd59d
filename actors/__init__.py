"""The trio runtime: a router, one actor per context key, TTL, eviction, supervision.

```python
async with open_runtime([planning]) as runtime:
    result = await runtime.call_tool(
        "planning__create_goal", {"goal": "Learn Rust", "__sessionId": "s1"}
    )
```

From asyncio, `open_asyncio_runtime` (trio in guest mode on the loop); from
synchronous code, `open_blocking_runtime` (trio in a thread of its own).
"""

from ._argparse import package_version as _package_version
from ._shadowed import check_protocol_package

check_protocol_package()  # before anything imports `protocol`: a user's protocol.py may hide it

from ._blocking import BlockingRuntime as BlockingRuntime
from ._blocking import open_blocking_runtime as open_blocking_runtime
from ._client import Answer as Answer
from ._client import Ask as Ask
from ._client import Asker as Asker
from ._client import CannotAskError as CannotAskError
from ._client import Log as Log
from ._client import LogMessage as LogMessage
from ._config import RuntimeConfig as RuntimeConfig
from ._durable import Durable as Durable
from ._durable import StateLoadError as StateLoadError
from ._error_result import error_result as error_result
from ._errors import ActorCrashedError as ActorCrashedError
from ._errors import ArgumentsError as ArgumentsError
from ._errors import CallError as CallError
from ._errors import CallTimeoutError as CallTimeoutError
from ._errors import CapacityError as CapacityError
from ._errors import HandlerError as HandlerError
from ._errors import RuntimeCallError as RuntimeCallError
from ._errors import RuntimeClosedError as RuntimeClosedError
from ._errors import SessionEndingError as SessionEndingError
from ._errors import StateUnreadableError as StateUnreadableError
from ._errors import ToolError as ToolError
from ._errors import UnknownPromptError as UnknownPromptError
from ._errors import UnknownResourceError as UnknownResourceError
from ._errors import UnknownToolError as UnknownToolError
from ._guest import AsyncioRuntime as AsyncioRuntime
from ._guest import open_asyncio_runtime as open_asyncio_runtime
from ._module import Completion as Completion
from ._module import Prompt as Prompt
from ._module import PromptArgument as PromptArgument
from ._module import Resource as Resource
from ._module import Tool as Tool
from ._module import ToolModule as ToolModule
from ._observe import CallRecord as CallRecord
from ._observe import Observer as Observer
from ._observe import Observers as Observers
from ._observe import StopReason as StopReason
from ._observe import outcome_of as outcome_of
from ._prepare import PreparedCall as PreparedCall
from ._prepare import prepare_call as prepare_call
from ._prepare import prepare_completion as prepare_completion
from ._prepare import prepare_prompt as prepare_prompt
from ._prepare import prepare_read as prepare_read
from ._progress import Progress as Progress
from ._progress import ProgressReport as ProgressReport
from ._registry import Registry as Registry
from ._resources import Completions as Completions
from ._runtime import ActorInfo as ActorInfo
from ._runtime import Runtime as Runtime
from ._runtime import RuntimeStatistics as RuntimeStatistics
from ._runtime import open_runtime as open_runtime
from ._schema import Signature as Signature
from ._target import BlockingAsker as BlockingAsker
from ._target import BlockingTarget as BlockingTarget
from ._target import CallTarget as CallTarget
from ._target import Host as Host
from ._target import Watcher as Watcher

__version__: str = _package_version()
"""The installed version of mcp-actors."""

__all__ = [
    "ActorCrashedError",
    "ActorInfo",
    "Answer",
    "ArgumentsError",
    "Ask",
    "Asker",
    "AsyncioRuntime",
    "BlockingAsker",
    "BlockingRuntime",
    "BlockingTarget",
    "CallError",
    "CallRecord",
    "CallTarget",
    "CallTimeoutError",
    "CannotAskError",
    "CapacityError",
    "Completion",
    "Completions",
    "Durable",
    "HandlerError",
    "Host",
    "Log",
    "LogMessage",
    "Observer",
    "Observers",
    "PreparedCall",
    "Progress",
    "ProgressReport",
    "Prompt",
    "PromptArgument",
    "Registry",
    "Resource",
    "Runtime",
    "RuntimeCallError",
    "RuntimeClosedError",
    "RuntimeConfig",
    "RuntimeStatistics",
    "SessionEndingError",
    "Signature",
    "StateLoadError",
    "StateUnreadableError",
    "StopReason",
    "Tool",
    "ToolError",
    "ToolModule",
    "UnknownPromptError",
    "UnknownResourceError",
    "UnknownToolError",
    "Watcher",
    "__version__",
    "error_result",
    "open_asyncio_runtime",
    "open_blocking_runtime",
    "open_runtime",
    "outcome_of",
    "prepare_call",
    "prepare_completion",
    "prepare_prompt",
    "prepare_read",
]
