"""The trio runtime: a router, one actor per context key, TTL, eviction, supervision.

async with open_runtime([planning]) as runtime:
    result = await runtime.call_tool(
        "planning__create_goal", {"goal": "Learn Rust", "__sessionId": "s1"}
    )
"""

from ._durable import Durable as Durable
from ._durable import StateLoadError as StateLoadError
from ._errors import ActorCrashedError as ActorCrashedError
from ._errors import ArgumentsError as ArgumentsError
from ._errors import CallTimeoutError as CallTimeoutError
from ._errors import CapacityError as CapacityError
from ._errors import RuntimeCallError as RuntimeCallError
from ._errors import RuntimeClosedError as RuntimeClosedError
from ._errors import SessionEndingError as SessionEndingError
from ._errors import ToolError as ToolError
from ._errors import UnknownToolError as UnknownToolError
from ._module import Tool as Tool
from ._module import ToolModule as ToolModule
from ._prepare import PreparedCall as PreparedCall
from ._prepare import prepare_call as prepare_call
from ._registry import Registry as Registry
from ._runtime import ActorInfo as ActorInfo
from ._runtime import Runtime as Runtime
from ._runtime import RuntimeConfig as RuntimeConfig
from ._runtime import RuntimeStatistics as RuntimeStatistics
from ._runtime import open_runtime as open_runtime
from ._schema import Signature as Signature
