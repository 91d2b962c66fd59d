"""The integrator's names: for driving the runtime from outside, not for writing a module.

A module author needs `actors` alone (`ToolModule`, `Scope`, `ToolContext`,
`CallResult`, `ToolError`, `open_runtime`...). This module is for whoever
builds *around* the runtime: a host or a proxy that turns MCP requests into
calls (`prepare_call` and its siblings, `PreparedCall`, `Registry`,
`Signature`), a new host (`Host`, `CallTarget`, `BlockingTarget`,
`BlockingAsker`, `Watcher`), a telemetry sink (`Observer`, `Observers`,
`CallRecord`, `StopReason`, `outcome_of`), or an embedding that answers its
model as the MCP server would (`error_result`).

```python
from actors.lowlevel import Registry, prepare_call

call = {"name": "notes__add", "arguments": {"text": "hi", "__sessionId": "s1"}}
prepared = prepare_call(Registry([notes]), call)  # parsed, resolved, routed; not run
```

These names were importable from `actors` before; that spelling still works
but warns (`DeprecationWarning`) and names the one here.
"""

from ._error_result import error_result as error_result
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
from ._registry import Registry as Registry
from ._schema import Signature as Signature
from ._target import BlockingAsker as BlockingAsker
from ._target import BlockingTarget as BlockingTarget
from ._target import CallTarget as CallTarget
from ._target import Host as Host
from ._target import Watcher as Watcher

__all__ = [
    "BlockingAsker",
    "BlockingTarget",
    "CallRecord",
    "CallTarget",
    "Host",
    "Observer",
    "Observers",
    "PreparedCall",
    "Registry",
    "Signature",
    "StopReason",
    "Watcher",
    "error_result",
    "outcome_of",
    "prepare_call",
    "prepare_completion",
    "prepare_prompt",
    "prepare_read",
]
