"""What each JSON-RPC message the SDK cannot take gets in reply, and how batches are answered.

Both transports put this in front of the SDK (sans-IO: no trio, no sockets).

What the SDK does with a bad message
------------------------------------
The SDK parses each message into a request, a notification or a response.
A request whose ``id`` is not a string or an integer (``1.5``, ``null``,
``true``, ``{}``, ``[]``) parses as a *notification*, its id dropped, and
gets no reply at all; anything else it cannot parse (array ``params``, a
wrong ``jsonrpc``, a batch) is refused without its id (HTTP) or dropped
(stdio). A client waiting on that request waits forever.

Our rules
---------
Every request that can be answered is answered once (JSON-RPC 2.0, section 5):

* The reply carries the request's id whenever one can be read: a string or
  any JSON number, even one MCP does not allow (``1.5`` is echoed, with an
  error saying ids must be strings or integers).
* ``id`` null, ``true``/``false``, an object or an array: the id cannot be
  determined, so the error carries ``id: null`` (JSON-RPC 2.0). MCP forbids
  a null id, so such a request is refused too, never run.
* With a readable id: a wrong ``jsonrpc`` version or a missing method is
  -32600 Invalid Request; ``params`` that are an array is -32602 Invalid
  params (JSON-RPC allows arrays, MCP does not).
* A malformed *notification* (no ``id``) that is still valid JSON-RPC (say,
  array params) gets no reply, as JSON-RPC requires; one that is not even
  that (no method, wrong ``jsonrpc``) is an invalid Request object and gets
  an error with ``id: null``, as in the specification's examples.
* Something shaped like a response (``result`` or ``error``, no method) is
  never answered with its id: an error carrying that id could settle one of
  the client's own requests. It is the client's answer to one of the
  server's requests (a question a tool asks, a sampling request): a
  malformed one with a string or integer id is handed to the SDK as an
  error response naming what is wrong, so the request it answers ends at
  once (the tool hears the client's answer is malformed) rather than
  waiting out its timeout. An id the server never used settles nothing,
  and the SDK drops it.

Batches
-------
JSON-RPC batches (a JSON array of messages) exist in one MCP version only:
2025-03-26 added them ("implementations MUST support receiving JSON-RPC
batches") and 2025-06-18 removed them. So:

* On a connection that negotiated 2025-03-26, a batch is processed: each
  message is handed to the SDK on its own, and the replies to its requests
  come back together, as one JSON array, once every one has settled.
  ``initialize`` may not be part of a batch (that version says so) and is
  refused in it, and so is a request whose id an earlier request of the
  batch has (MCP: a request id is never reused in a session): the SDK
  would answer only one of the two, and the batch would wait forever for
  the other.
* Under any other version, or before a version was negotiated, batches are
  not part of the protocol: each request in it gets an error with its own
  id, saying so, and the errors come back as one array (the shape a client
  that sends batches reads); its notifications are dropped.
* A batch holds at most ``limit`` messages (the server's bound on requests
  in flight: its replies are held until the last one). A longer one, under
  any version, is refused as a whole with a single error, its messages
  unread: answering each would cost a validation and an error per message,
  and a 1 MiB body holds half a million of them (seconds of CPU on the
  event loop and an answer many times the body: ``docs/performance.md``).
* An empty array is a single Invalid Request error (JSON-RPC 2.0).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final, Literal, final

import attrs
import pydantic
from mcp import types

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "BATCH_VERSION",
    "Accept",
    "Answer",
    "BatchPlan",
    "BatchReply",
    "Ignore",
    "Reply",
    "Verdict",
    "plan_batch",
    "screen",
]

BATCH_VERSION: Final = "2025-03-26"
"""The one protocol version whose clients may send JSON-RPC batches."""

ReplyId = int | float | str | None
"""An id as it is echoed: any JSON number, since JSON-RPC 2.0 allows fractions and MCP does not."""


class Reply(pydantic.BaseModel):
    """An error response built here; unlike the SDK's, its id may be any JSON number."""

    model_config = pydantic.ConfigDict(frozen=True)

    jsonrpc: Literal["2.0"]
    id: ReplyId
    error: types.ErrorData

    @classmethod
    def of(cls, request_id: ReplyId, code: int, message: str) -> Reply:
        """The error `code` with `message`, for the request `request_id`."""
        return cls(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


class BatchReply(pydantic.RootModel[list[dict[str, Any]]]):
    """The replies to one batch, as one JSON array."""

    @classmethod
    def of(cls, replies: Iterable[pydantic.BaseModel]) -> BatchReply:
        """The array of `replies`, each serialized as the SDK serializes messages."""
        return cls(
            [reply.model_dump(mode="json", by_alias=True, exclude_unset=True) for reply in replies]
        )


@final
@attrs.frozen
class Accept:
    """A message the SDK can take as it is."""

    message: types.JSONRPCMessage


@final
@attrs.frozen
class Answer:
    """A message refused with an error, to be sent back at once."""

    reply: Reply


@final
@attrs.frozen
class Ignore:
    """A malformed notification: JSON-RPC forbids replying, so it is only logged."""

    problem: str


Verdict = Accept | Answer | Ignore


def screen(value: object) -> Verdict:
    """What to do with one parsed JSON value received as a message."""
    if isinstance(value, dict):
        try:
            message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
        except pydantic.ValidationError:
            pass
        else:
            # The SDK turns a request with an unusable id into a notification.
            if not (isinstance(message, types.JSONRPCNotification) and "id" in value):
                return Accept(message)
        return _refuse(value)
    kind = "an array" if isinstance(value, list) else f"a JSON {_kind(value)}"
    return Answer(_invalid(None, f"a JSON-RPC message is an object, got {kind}"))


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _invalid(request_id: ReplyId, problem: str) -> Reply:
    return Reply.of(request_id, types.INVALID_REQUEST, f"Invalid Request: {problem}")


def _readable_id(value: object) -> tuple[ReplyId, str | None]:
    """The id to echo (``None``: it cannot be determined) and what is wrong with it, if anything."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value, None
    if isinstance(value, float) and math.isfinite(value):
        return value, f"id must be a string or an integer (MCP), got {value!r}"
    if value is None:
        return None, "id must not be null (MCP): a request needs a string or integer id"
    return None, f"id must be a string or an integer, got a JSON {_kind(value)}"


def _refuse(message: dict[Any, Any]) -> Verdict:
    """Why `message`, an object the SDK could not take as it is, is refused."""
    if "method" not in message and ("result" in message or "error" in message):
        return _malformed_response(message)
    has_id = "id" in message
    request_id, id_problem = _readable_id(message.get("id")) if has_id else (None, None)
    envelope = _envelope_problem(message)
    if envelope is not None:
        return Answer(_invalid(request_id, envelope))
    if id_problem is not None:
        return Answer(_invalid(request_id, id_problem))
    params = message.get("params")
    params_problem = (
        None if "params" not in message or isinstance(params, dict) else _params_problem(params)
    )
    if not has_id:
        # A notification that is valid JSON-RPC but not valid MCP: no reply is allowed.
        return Ignore(params_problem or "a notification the SDK could not parse")
    if isinstance(params, list):
        return Answer(
            Reply.of(request_id, types.INVALID_PARAMS, f"Invalid params: {params_problem}")
        )
    return Answer(_invalid(request_id, params_problem or "not a valid JSON-RPC 2.0 request"))


def _malformed_response(message: dict[Any, Any]) -> Accept | Answer:
    """A client's answer to a request of the server that the SDK could not parse.

    With a usable id, it settles that request as an error saying what is wrong;
    without one, nothing can be settled, and the client is told.
    """
    answered = message.get("id")
    problem = _response_problem(message)
    if isinstance(answered, str) or (isinstance(answered, int) and not isinstance(answered, bool)):
        error = types.ErrorData(
            code=types.INVALID_REQUEST, message=f"a malformed answer: {problem}"
        )
        return Accept(types.JSONRPCError(jsonrpc="2.0", id=answered, error=error))
    return Answer(_invalid(None, f"a malformed response ({problem})"))


def _response_problem(message: dict[Any, Any]) -> str:
    if message.get("jsonrpc") != "2.0":
        return f'jsonrpc must be "2.0", got {_shown(message.get("jsonrpc"))}'
    if "result" in message:
        return f"result must be an object, got a JSON {_kind(message['result'])}"
    if "id" not in message or _readable_id(message["id"])[1] is not None:
        return f"id must be a string or an integer, got {_shown(message.get('id'))}"
    return "error must be an object with an integer code and a string message"


def _envelope_problem(message: dict[Any, Any]) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return f'jsonrpc must be "2.0", got {_shown(message.get("jsonrpc"))}'
    if "method" not in message:
        return "a request needs a method"
    if not isinstance(message["method"], str):
        return f"method must be a string, got a JSON {_kind(message['method'])}"
    params = message.get("params")
    if "params" in message and not isinstance(params, dict | list):
        return f"params must be an object, got a JSON {_kind(params)}"
    return None


def _params_problem(params: object) -> str:
    return f"params must be an object (MCP), got a JSON {_kind(params)}"


def _shown(value: object) -> str:
    return "nothing" if value is None else repr(value)[:40]


@final
@attrs.frozen
class BatchPlan:
    """What to do with the messages of one batch."""

    dispatch: tuple[types.JSONRPCMessage, ...]
    """Messages to hand to the SDK, one by one; the replies to its requests join `answers`."""
    answers: tuple[Reply, ...]
    """Errors for the messages refused, sent back in the batch's array."""
    ignored: tuple[str, ...]
    """Why each dropped notification was dropped, for the log."""
    whole: Reply | None = None
    """An error for the whole batch (empty, or too long), sent alone rather than in an array."""


def plan_batch(elements: Sequence[object], version: str | None, limit: int) -> BatchPlan:
    """What to do with a batch received on a connection that negotiated `version`."""
    if not elements:
        return BatchPlan((), (), (), whole=_invalid(None, "an empty batch"))
    if len(elements) > limit:
        problem = f"a batch holds at most {limit} messages on this server; this one has "
        return BatchPlan((), (), (), whole=_invalid(None, problem + str(len(elements))))
    refusal = _batch_refusal(version)
    dispatch: list[types.JSONRPCMessage] = []
    answers: list[Reply] = []
    ignored: list[str] = []
    dispatched: set[types.RequestId] = set()
    for element in elements:
        match screen(element):
            case Accept(types.JSONRPCRequest() as request) if refusal is not None:
                answers.append(_invalid(request.id, refusal))
            case Accept(types.JSONRPCRequest(method="initialize") as request):
                answers.append(_invalid(request.id, "initialize must not be part of a batch"))
            case Accept(types.JSONRPCRequest(id=request_id)) if request_id in dispatched:
                problem = f"id {request_id!r} is taken by an earlier request of this batch"
                answers.append(_invalid(request_id, f"{problem}; each request needs its own"))
            case Accept(message) if refusal is not None:
                ignored.append(f"{refusal} (a {type(message).__name__} was dropped)")
            case Accept(message):
                dispatch.append(message)
                if isinstance(message, types.JSONRPCRequest):
                    dispatched.add(message.id)
            case Answer(reply):
                answers.append(reply)
            case Ignore(problem):
                ignored.append(problem)
    return BatchPlan(tuple(dispatch), tuple(answers), tuple(ignored))


def _batch_refusal(version: str | None) -> str | None:
    """Why a batch is refused under `version`, or ``None``."""
    if version is None:
        return (
            f"batches are accepted only after the handshake negotiated protocol version "
            f"{BATCH_VERSION}; send each message on its own"
        )
    if version != BATCH_VERSION:
        return (
            f"batches are not part of protocol version {version} (only {BATCH_VERSION} has them); "
            "send each message on its own"
        )
    return None
