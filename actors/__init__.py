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

import importlib as _importlib
import warnings as _warnings
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._argparse import package_version as _package_version
from ._shadowed import check_protocol_package

check_protocol_package()  # before anything imports `protocol`: a user's protocol.py may hide it

from protocol import AudioContent as AudioContent
from protocol import CallResult as CallResult
from protocol import EmbeddedResource as EmbeddedResource
from protocol import ImageContent as ImageContent
from protocol import PromptMessage as PromptMessage
from protocol import PromptResult as PromptResult
from protocol import ResourceContents as ResourceContents
from protocol import ResourceLink as ResourceLink
from protocol import ResourceResult as ResourceResult
from protocol import Scope as Scope
from protocol import TextContent as TextContent
from protocol import ToolContext as ToolContext

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
from ._progress import Progress as Progress
from ._progress import ProgressReport as ProgressReport
from ._resources import Completions as Completions
from ._runtime import ActorInfo as ActorInfo
from ._runtime import Runtime as Runtime
from ._runtime import RuntimeStatistics as RuntimeStatistics
from ._runtime import open_runtime as open_runtime

__version__: str = _package_version()
"""The installed version of mcp-actors."""


# Typed for mypy; at run time `__getattr__` below serves them, with a warning.
if _TYPE_CHECKING:
    from .lowlevel import BlockingAsker as BlockingAsker
    from .lowlevel import BlockingTarget as BlockingTarget
    from .lowlevel import CallRecord as CallRecord
    from .lowlevel import CallTarget as CallTarget
    from .lowlevel import Host as Host
    from .lowlevel import Observer as Observer
    from .lowlevel import Observers as Observers
    from .lowlevel import PreparedCall as PreparedCall
    from .lowlevel import Registry as Registry
    from .lowlevel import Signature as Signature
    from .lowlevel import StopReason as StopReason
    from .lowlevel import Watcher as Watcher
    from .lowlevel import error_result as error_result
    from .lowlevel import outcome_of as outcome_of
    from .lowlevel import prepare_call as prepare_call
    from .lowlevel import prepare_completion as prepare_completion
    from .lowlevel import prepare_prompt as prepare_prompt
    from .lowlevel import prepare_read as prepare_read


def __getattr__(name: str) -> object:
    """An integrator's name by its old spelling, ``actors.X``: warns of ``actors.lowlevel.X``."""
    # Imported here, not above: only an old spelling pays for it. `import_module`, not
    # ``from . import``, which would ask this function for ``lowlevel`` again, endlessly.
    lowlevel = _importlib.import_module("actors.lowlevel")

    if name not in lowlevel.__all__:
        msg = f"module 'actors' has no attribute {name!r}"
        raise AttributeError(msg)
    _warnings.warn(
        f"actors.{name} moved to actors.lowlevel (an integrator's name): write "
        f"`from actors.lowlevel import {name}`; `from actors import {name}` is deprecated",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(lowlevel, name)


# In the order an author meets them: a module, its state and scope, what a handler
# reads and returns, what it can do mid-call, then running it, then the rest. Not sorted:
# the reference page and an editor's completion show this order.
__all__ = [  # noqa: RUF022
    "ToolModule",
    "Durable",
    "Scope",
    "ToolContext",
    "CallResult",
    "ToolError",
    "Progress",
    "Log",
    "Ask",
    "open_runtime",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "EmbeddedResource",
    "ResourceLink",
    "ResourceContents",
    "ResourceResult",
    "PromptMessage",
    "PromptResult",
    "Tool",
    "Resource",
    "Prompt",
    "PromptArgument",
    "Completion",
    "Completions",
    "Runtime",
    "RuntimeConfig",
    "open_asyncio_runtime",
    "AsyncioRuntime",
    "open_blocking_runtime",
    "BlockingRuntime",
    "Answer",
    "Asker",
    "CannotAskError",
    "LogMessage",
    "ProgressReport",
    "ActorInfo",
    "RuntimeStatistics",
    "StateLoadError",
    "CallError",
    "RuntimeCallError",
    "UnknownToolError",
    "UnknownResourceError",
    "UnknownPromptError",
    "ArgumentsError",
    "HandlerError",
    "CallTimeoutError",
    "ActorCrashedError",
    "StateUnreadableError",
    "RuntimeClosedError",
    "CapacityError",
    "SessionEndingError",
    "__version__",
]
