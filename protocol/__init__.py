"""Sans-IO core: tool contexts, call parsing, scopes and keys, results, content, names, placement.

Nothing here does I/O or imports trio, so it can serve a client-side
middleware or another runtime as well as `actors`.
"""

from ._call import ParsedCall as ParsedCall
from ._call import call_name as call_name
from ._call import parse_call as parse_call
from ._call import parse_named_call as parse_named_call
from ._call import split_call as split_call
from ._caller import Caller as Caller
from ._caller import ConfinedError as ConfinedError
from ._caller import NoSessionError as NoSessionError
from ._caller import ReachError as ReachError
from ._caller import TenantError as TenantError
from ._caller import in_tenant as in_tenant
from ._content import SERVICE_INFO_META_KEY as SERVICE_INFO_META_KEY
from ._content import AudioContent as AudioContent
from ._content import BackendType as BackendType
from ._content import Content as Content
from ._content import EmbeddedResource as EmbeddedResource
from ._content import ImageContent as ImageContent
from ._content import ResourceContents as ResourceContents
from ._content import ResourceLink as ResourceLink
from ._content import ServiceInfo as ServiceInfo
from ._content import TextContent as TextContent
from ._content import service_info_of as service_info_of
from ._context import DEFAULT_POLICY as DEFAULT_POLICY
from ._context import ContextPolicy as ContextPolicy
from ._context import SessionSource as SessionSource
from ._context import ToolContext as ToolContext
from ._context import extract_context as extract_context
from ._context import inject_context as inject_context
from ._errors import CallError as CallError
from ._errors import CallFormatError as CallFormatError
from ._errors import ContextError as ContextError
from ._errors import ProtocolError as ProtocolError
from ._errors import ToolNameError as ToolNameError
from ._handles import DEFAULT_LIFETIME as DEFAULT_LIFETIME
from ._handles import HANDLE_ARGUMENT as HANDLE_ARGUMENT
from ._handles import HANDLE_PREFIX as HANDLE_PREFIX
from ._handles import HANDLE_REQUIRED as HANDLE_REQUIRED
from ._handles import HANDLE_TOOL as HANDLE_TOOL
from ._handles import HandleError as HandleError
from ._handles import HandleKeys as HandleKeys
from ._handles import HandleReader as HandleReader
from ._handles import HandleRequiredError as HandleRequiredError
from ._handles import handle_in_uri as handle_in_uri
from ._handles import redacted_uri as redacted_uri
from ._handles import shown_handle as shown_handle
from ._names import BUILTIN_PREFIX as BUILTIN_PREFIX
from ._names import SEPARATOR as SEPARATOR
from ._names import ToolName as ToolName
from ._names import has_scheme as has_scheme
from ._names import name_from_service as name_from_service
from ._placement import Membership as Membership
from ._placement import shard_for as shard_for
from ._result import CallResult as CallResult
from ._result import PromptMessage as PromptMessage
from ._result import PromptResult as PromptResult
from ._result import ResourceResult as ResourceResult
from ._result import ToolResult as ToolResult
from ._result import render_data as render_data
from ._result import to_tool_result as to_tool_result
from ._result import unwrap as unwrap
from ._scope import TENANT_SEPARATOR as TENANT_SEPARATOR
from ._scope import ActorKey as ActorKey
from ._scope import Scope as Scope
from ._scope import actor_key as actor_key
from ._scope import tenant_of as tenant_of

__all__ = [
    "BUILTIN_PREFIX",
    "DEFAULT_LIFETIME",
    "DEFAULT_POLICY",
    "HANDLE_ARGUMENT",
    "HANDLE_PREFIX",
    "HANDLE_REQUIRED",
    "HANDLE_TOOL",
    "SEPARATOR",
    "SERVICE_INFO_META_KEY",
    "TENANT_SEPARATOR",
    "ActorKey",
    "AudioContent",
    "BackendType",
    "CallError",
    "CallFormatError",
    "CallResult",
    "Caller",
    "ConfinedError",
    "Content",
    "ContextError",
    "ContextPolicy",
    "EmbeddedResource",
    "HandleError",
    "HandleKeys",
    "HandleReader",
    "HandleRequiredError",
    "ImageContent",
    "Membership",
    "NoSessionError",
    "ParsedCall",
    "PromptMessage",
    "PromptResult",
    "ProtocolError",
    "ReachError",
    "ResourceContents",
    "ResourceLink",
    "ResourceResult",
    "Scope",
    "ServiceInfo",
    "SessionSource",
    "TenantError",
    "TextContent",
    "ToolContext",
    "ToolName",
    "ToolNameError",
    "ToolResult",
    "actor_key",
    "call_name",
    "extract_context",
    "handle_in_uri",
    "has_scheme",
    "in_tenant",
    "inject_context",
    "name_from_service",
    "parse_call",
    "parse_named_call",
    "redacted_uri",
    "render_data",
    "service_info_of",
    "shard_for",
    "shown_handle",
    "split_call",
    "tenant_of",
    "to_tool_result",
    "unwrap",
]
