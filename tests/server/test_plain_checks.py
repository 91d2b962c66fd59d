"""The lean paths' checks decide as the SDK's own functions do, on every input.

`actors.server.mcp._plain` decides the usual request envelopes and params, and
shapes the usual call results, without pydantic, and leaves anything else to the
SDK's function. Each test here generates inputs, the usual shapes and near misses
(wrong types, extra keys, a bad ``_meta``, every protocol version), and asserts
that the fast function gives what the SDK's gives: the same verdict, the same
version, the same JSON in the same key order, or the same exception. Other tests
check that the usual shapes do take the fast way, so that a fast check that
always deferred to the SDK would not pass for a fast one.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import math
from typing import TYPE_CHECKING, Any, Final, NoReturn
from unittest import mock

import pydantic
import pytest
import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mcp.shared.inbound import (
    InboundLadderRejection,
    classify_inbound_request,
    encode_header_value,
)
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types import methods as spec_methods
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers

from actors import ToolModule, open_runtime
from actors.server import McpAdapter
from actors.server.mcp import _plain
from actors.server.mcp._plain import PlainAnswers, envelope_version, valid_params
from protocol import (
    AudioContent,
    BackendType,
    CallResult,
    EmbeddedResource,
    ImageContent,
    ResourceContents,
    ResourceLink,
    ServiceInfo,
    TextContent,
)

from ..strategies import json_values, model_arguments

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

MODERN: Final = MODERN_PROTOCOL_VERSIONS[0]
VERSIONS: Final = (*KNOWN_PROTOCOL_VERSIONS, "1999-01-01")
"""Every version the SDK knows, and one it does not (its functions refuse it)."""
_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"

# ---- values, usual and odd -------------------------------------------------------------

# A lone surrogate (JSON's "\ud800") passes as a string field but not as a model's extra
# key; a base64 sentinel is what the SDK decodes in an Mcp-Name header.
texts = st.text(max_size=6) | st.sampled_from(["lean__bump", "\ud800", "é", "=?base64?eA==?="])
odd = st.sampled_from(
    [None, True, False, 0, 1, 1.0, 1.5, 2**70, "", "x", "\ud800", [], ["x"], {}, {"a": 1}, {1: "x"}]
).map(copy.deepcopy)  # each a value of its own, which a near miss may change
"""Values of every JSON type (and a few only Python has) where a field wants another."""
tokens = texts | st.integers() | st.sampled_from([None, True, 1.0, 1.5, []])

capabilities = (
    st.just({})
    | st.dictionaries(
        st.sampled_from(
            ["elicitation", "sampling", "roots", "experimental", "extensions", "tasks", "x"]
        ),
        st.sampled_from(
            [None, {}, {"listChanged": True}, {"form": {}}, {"x": {}}, [], "yes", {1: 2}]
        ),
        max_size=3,
    )
    | odd
)
_INFO_OPTIONAL: Final = {
    "title": texts | odd,
    "description": texts | odd,
    "websiteUrl": texts | odd,
    "icons": st.sampled_from([None, [], [{"src": "https://example.com/i.png"}], "x"]),
    "website_url": odd,
    "other": odd,
}
client_infos = (
    st.fixed_dictionaries({"name": texts, "version": texts}, optional=_INFO_OPTIONAL)
    | st.fixed_dictionaries(
        {}, optional={"name": texts | odd, "version": texts | odd, **_INFO_OPTIONAL}
    )
    | odd
)
_EXTRAS: Final = {
    "sessionId": json_values,
    "dev.example/custom": json_values,
    "progress_token": odd,  # a field's Python name: an extra key to the SDK
    "\ud800": odd,
    "é": odd,
}
_MODERN_OPTIONAL: Final = {
    CLIENT_INFO_META_KEY: client_infos,
    _LOG_LEVEL: st.sampled_from(["info", "debug", "loud", None, 3, ["info"]]),
    "progressToken": tokens,
    **_EXTRAS,
}
# Mostly of the 2026 era, and usual, so that the fast way is often the one taken.
envelope_versions = st.sampled_from([MODERN] * len(VERSIONS) + list(VERSIONS))
_USUAL_MODERN: Final = {
    PROTOCOL_VERSION_META_KEY: envelope_versions,
    CLIENT_CAPABILITIES_META_KEY: capabilities,
}
modern_metas = st.fixed_dictionaries(
    _USUAL_MODERN, optional=_MODERN_OPTIONAL
) | st.fixed_dictionaries(
    {},
    optional={
        PROTOCOL_VERSION_META_KEY: st.sampled_from(VERSIONS) | odd,
        CLIENT_CAPABILITIES_META_KEY: capabilities,
        **_MODERN_OPTIONAL,
    },
)
handshake_metas = st.fixed_dictionaries({}, optional={"progressToken": tokens, **_EXTRAS})
metas = modern_metas | handshake_metas | odd

arguments = model_arguments | st.sampled_from([None, {1: 2}, {"\ud800": 1}, [], "x"])
_PARAMS_ODDITIES: Final = {
    "task": st.sampled_from([None, {"ttl": 5}, "x"]),
    "inputResponses": odd,
    "requestState": odd,
    "other": odd,
}


def call_params(metas: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A ``tools/call``'s params, with a ``_meta`` of `metas`: usual, odd, or missing parts."""
    usual = {"name": texts, "_meta": metas}
    return (
        st.fixed_dictionaries(usual, optional={"arguments": arguments})
        | st.fixed_dictionaries(usual, optional={"arguments": arguments, **_PARAMS_ODDITIES})
        | st.fixed_dictionaries(
            {}, optional={"name": texts | odd, "arguments": arguments, "_meta": metas}
        )
        | odd
    )


def list_params(metas: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A ``tools/list``'s params, with a ``_meta`` of `metas`: usual, odd, or missing parts."""
    return (
        st.fixed_dictionaries({"_meta": metas}, optional={"cursor": texts | odd})
        | st.fixed_dictionaries(
            {}, optional={"cursor": texts | odd, "_meta": metas, **_PARAMS_ODDITIES}
        )
        | st.sampled_from([None, [], "x"])
    )


@st.composite
def requests(draw: st.DrawFn, metas: st.SearchStrategy[Any] = metas) -> dict[str, Any]:
    """A JSON-RPC request of a plain method (sometimes another), with params or without."""
    method = draw(st.sampled_from(["tools/call", "tools/list", "ping", "resources/list"]))
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if draw(st.integers(0, 9)):
        params = call_params if method == "tools/call" else list_params
        message["params"] = draw(params(metas))
    return message


# The usual requests, as clients send them at each version...
usual_capabilities = st.fixed_dictionaries(
    {},
    optional={
        "elicitation": st.sampled_from([{}, {"form": {}}]),
        "sampling": st.just({}),
        "roots": st.sampled_from([{}, {"listChanged": True}]),
        "experimental": st.just({}),
    },
)
usual_modern_metas = st.fixed_dictionaries(
    {PROTOCOL_VERSION_META_KEY: st.just(MODERN), CLIENT_CAPABILITIES_META_KEY: usual_capabilities},
    optional={
        CLIENT_INFO_META_KEY: st.fixed_dictionaries(
            {"name": texts, "version": texts}, optional={"title": texts}
        ),
        _LOG_LEVEL: st.sampled_from(["info", "debug", "error"]),
        "progressToken": st.integers() | texts,
        "sessionId": texts,
    },
)
usual_handshake_metas = st.fixed_dictionaries(
    {}, optional={"progressToken": st.integers() | texts, "sessionId": texts}
)


@st.composite
def usual_requests(draw: st.DrawFn, versions: tuple[str, ...] = VERSIONS) -> tuple[Any, str]:
    """A ``tools/call`` or ``tools/list`` as a client sends it, and its version."""
    version = draw(st.sampled_from(versions))
    meta = draw(usual_modern_metas if version == MODERN else usual_handshake_metas)
    params: dict[str, Any] = {"_meta": meta}
    if draw(st.booleans()):
        method = "tools/call"
        params["name"] = draw(texts)
        if draw(st.booleans()):
            params["arguments"] = draw(model_arguments)
    else:
        method = "tools/list"
        if draw(st.booleans()):
            params["cursor"] = draw(texts)
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, version


# ... and nearly so: a member of any object in them changed to an odd value, added or gone.
_MEMBERS: Final = st.sampled_from(
    [
        "name",
        "arguments",
        "_meta",
        "cursor",
        "task",
        "requestState",
        "progressToken",
        "progress_token",
        PROTOCOL_VERSION_META_KEY,
        CLIENT_CAPABILITIES_META_KEY,
        CLIENT_INFO_META_KEY,
        _LOG_LEVEL,
        "elicitation",
        "roots",
        "extensions",
        "version",
        "websiteUrl",
        "icons",
        "annotations",
        "\ud800",
        "é",
    ]
)


def _objects(value: Any) -> Iterator[dict[Any, Any]]:
    """Every object in `value`, itself included, outermost first."""
    if isinstance(value, dict):
        yield value
        for member in value.values():
            yield from _objects(member)
    elif isinstance(value, list):
        for member in value:
            yield from _objects(member)


@st.composite
def nearly(draw: st.DrawFn, value: Any) -> Any:
    """`value` (a copy) with one or two near misses."""
    value = copy.deepcopy(value)
    for _ in range(draw(st.integers(1, 2))):
        place = draw(st.sampled_from(list(_objects(value))))
        present = st.sampled_from(sorted(place, key=repr)) if place else _MEMBERS
        key = draw(present | _MEMBERS)
        if draw(st.integers(0, 3)):
            place[key] = draw(odd)
        else:
            place.pop(key, None)
    return value


near_miss_requests = usual_requests().flatmap(
    lambda usual: st.tuples(nearly(usual[0]), st.just(usual[1]))
)


# ---- valid_params ----------------------------------------------------------------------


def sdk_valid_params(message: dict[str, Any], version: str) -> bool:
    """What `valid_params` answered before it decided anything itself: the SDK's verdict."""
    try:
        spec_methods.validate_client_request(message["method"], version, message.get("params"))
    except (KeyError, ValueError, pydantic.ValidationError):
        return False
    return True


def usual_call(version: str = MODERN, **meta: Any) -> dict[str, Any]:
    """A ``tools/call`` as the SDK's client sends it at `version`."""
    envelope: dict[str, Any] = {}
    if version == MODERN:
        envelope = {
            PROTOCOL_VERSION_META_KEY: version,
            CLIENT_INFO_META_KEY: {"name": "test", "version": "1.0"},
            CLIENT_CAPABILITIES_META_KEY: {},
        }
    params = {"name": "lean__bump", "arguments": {"by": 2}, "_meta": {**envelope, **meta}}
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


@settings(max_examples=1000)
@given(usual_requests() | near_miss_requests | st.tuples(requests(), st.sampled_from(VERSIONS)))
@example((usual_call(), MODERN))
@example((usual_call("2025-06-18"), "2025-06-18"))
@example((usual_call("2025-06-18", progressToken=1.5), "2025-06-18"))
@example((usual_call(progressToken=True), MODERN))
@example((usual_call(**{"\ud800": 1}), MODERN))
@example(({"method": "tools/call", "params": {"name": 1}}, "2025-06-18"))
@example(({"method": "tools/list"}, MODERN))
@example(({"method": "tools/list", "params": {"cursor": 3}}, "2025-11-25"))
@example(
    (usual_call(**{CLIENT_INFO_META_KEY: {"name": "a", "version": "1", "icons": "x"}}), MODERN)
)
def test_valid_params_agrees_with_the_sdk(request_and_version: tuple[Any, str]) -> None:
    """For every request and version, `valid_params` says what the SDK's validation says."""
    message, version = request_and_version
    fast = _outcome(lambda: valid_params(message, version))
    assert fast == _outcome(lambda: sdk_valid_params(message, version))


USUAL_PARAMS: Final = (
    (usual_call(), MODERN),
    (usual_call(progressToken=3, sessionId="s1"), MODERN),
    (
        usual_call(
            **{
                CLIENT_CAPABILITIES_META_KEY: {"elicitation": {}, "roots": {"listChanged": True}},
                _LOG_LEVEL: "info",
            }
        ),
        MODERN,
    ),
    (usual_call("2025-06-18"), "2025-06-18"),
    (usual_call("2025-11-25", progressToken="p"), "2025-11-25"),
    ({"method": "tools/list", "params": {"_meta": usual_call()["params"]["_meta"]}}, MODERN),
    ({"method": "tools/list"}, "2025-03-26"),
    ({"method": "tools/list", "params": {"cursor": "c2"}}, "2025-11-25"),
)


@pytest.mark.parametrize(("message", "version"), USUAL_PARAMS)
def test_valid_params_decides_the_usual_shapes_itself(
    message: dict[str, Any], version: str
) -> None:
    """The params clients send every time are taken without the SDK's validation."""
    with _sdk_refused("validate_client_request"):
        assert valid_params(message, version)


# ---- envelope_version ------------------------------------------------------------------


def sdk_envelope_version(message: dict[str, Any], headers: Headers | None) -> str | None:
    """What the SDK's ladder says of `message`: its version, or None (refused)."""
    verdict = classify_inbound_request(message, headers=headers)
    return None if isinstance(verdict, InboundLadderRejection) else verdict.protocol_version


@st.composite
def enveloped_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A request with a 2026-era envelope, usual or nearly so, of any method."""
    method = draw(st.sampled_from(["tools/call", "tools/list", "prompts/get", "ping"]))
    params: dict[str, Any] = {"_meta": draw(modern_metas)}
    if method in {"tools/call", "prompts/get"}:
        params["name"] = draw(texts | odd)
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


@st.composite
def headered(draw: st.DrawFn) -> tuple[dict[str, Any], Headers | None]:
    """A request and its HTTP headers (None: stdio's, with none), agreeing or not."""
    modern = usual_requests((MODERN,)).map(lambda usual: usual[0])
    message = draw(modern | modern.flatmap(nearly) | enveloped_requests() | requests())
    if draw(st.integers(0, 4)) == 0:
        return message, None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    name = params.get("name") if isinstance(params, dict) else None
    method = message.get("method")
    sent_name = name if isinstance(name, str) and _in_header(name) else "x"
    choices = {
        # The headers that agree, mostly: then the fast way is the one taken.
        "mcp-protocol-version": [
            version if isinstance(version, str) and _in_header(version) else MODERN
        ]
        * 4
        + [MODERN, None],
        "mcp-method": [method if isinstance(method, str) and _in_header(method) else "x"] * 4
        + ["tools/list", None],
        "mcp-name": [
            *[sent_name] * 6,
            encode_header_value(sent_name),
            f"=?base64?{sent_name}?=",
            "other",
            None,
        ],
    }
    sent = {key: draw(st.sampled_from(values)) for key, values in choices.items()}
    return message, Headers({key: value for key, value in sent.items() if value is not None})


def _in_header(text: str) -> bool:
    """Whether `text` may be a header's value (HTTP's are Latin-1 text)."""
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _named(name: str) -> dict[str, Any]:
    call = usual_call()
    call["params"]["name"] = name
    return call


def _usual_headers(name: str = "lean__bump") -> Headers:
    return Headers({"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name})


@settings(max_examples=600)
@given(headered())
@example((usual_call(), _usual_headers()))
@example((_named("=?base64?eA==?="), _usual_headers("=?base64?eA==?=")))
@example((_named("x"), _usual_headers("=?base64?eA==?=")))
def test_envelope_version_agrees_with_the_sdk(
    request_and_headers: tuple[dict[str, Any], Headers | None],
) -> None:
    """For every request and headers (or none), `envelope_version` says what the ladder says."""
    message, headers = request_and_headers
    fast = _outcome(lambda: envelope_version(message, headers))
    assert fast == _outcome(lambda: sdk_envelope_version(message, headers))


@pytest.mark.parametrize("headers", [_usual_headers(), None], ids=["http", "stdio"])
def test_envelope_version_decides_the_usual_envelope_itself(headers: Headers | None) -> None:
    """A 2026-era envelope as clients send it is read without the SDK's ladder."""
    with _sdk_refused("classify_inbound_request"):
        assert envelope_version(usual_call(), headers) == MODERN


# ---- call_result -----------------------------------------------------------------------

services = st.none() | st.builds(
    ServiceInfo,
    st.sampled_from(["lean", "planning"]),
    st.sampled_from(["bump", "echo"]),
    st.sampled_from(list(BackendType)),
)
_MEDIA: Final = st.sampled_from(["image/png", "audio/wav", "text/plain; charset=utf-8"])
_URIS: Final = st.sampled_from(["file:///notes.txt", "mem://x/é"])
_OPTIONAL_TEXT: Final = st.none() | texts
resource_contents = st.builds(ResourceContents, _URIS, st.none() | _MEDIA, text=texts) | st.builds(
    ResourceContents, _URIS, st.none() | _MEDIA, blob=st.binary(max_size=8)
)
content_items = st.one_of(
    st.builds(TextContent, texts, services),
    st.builds(ImageContent, st.binary(max_size=8), _MEDIA, services),
    st.builds(AudioContent, st.binary(max_size=8), _MEDIA, services),
    st.builds(EmbeddedResource, resource_contents, services),
    st.builds(
        ResourceLink,
        _URIS,
        texts.filter(bool),
        _OPTIONAL_TEXT,
        st.none() | _MEDIA,
        _OPTIONAL_TEXT,
        services,
    ),
)
# Structured data as tools return it: JSON, and values JSON has no type for, which the
# SDK's dump writes in its own way (a tuple as a list, a date as ISO text, inf as null).
data_values = json_values | st.sampled_from(
    [1.5, math.inf, -math.nan, (1, "x"), b"raw", datetime.date(2026, 7, 28), [None, {"a": None}]]
)
structured = st.dictionaries(st.text(max_size=5), data_values, max_size=4)
call_results = st.one_of(
    st.builds(CallResult.text, texts),
    st.builds(CallResult.data, structured),
    st.builds(CallResult.both, texts, structured),
    st.builds(CallResult.error, texts),
    st.builds(
        lambda items, data, is_error: CallResult.of(*items, data=data, is_error=is_error),
        st.lists(content_items, max_size=4),
        st.none() | structured,
        st.booleans(),
    ),
)


@st.composite
def runtime_results(draw: st.DrawFn) -> dict[str, Any]:
    """A call's wire result as the runtime makes it (`CallResult.to_wire`), maybe stamped."""
    result = draw(call_results)
    service = draw(services)
    return (result if service is None else result.stamped(service)).to_wire()


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(wire: dict[str, Any]) -> None:
        target: Any = wire
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda wire: wire.pop(key, None)


def _each_item(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def changed(wire: dict[str, Any]) -> None:
        for item in wire["content"]:
            change(item)

    return changed


NEAR_MISSES: Final = (
    _set(("_meta",), {"dev.example/trace": "t1"}),
    _set(("_meta",), None),
    _set(("resultType",), "input_required"),
    _set(("isError",), 1),
    _set(("isError",), None),
    _set(("structuredContent",), ["not", "an", "object"]),
    _set(("structuredContent",), {1: "non-string key"}),
    _set(("structuredContent",), {"a": {1, 2}}),
    _set(("structuredContent",), None),
    _set(("content",), ()),
    _set(("content",), None),
    _drop("content"),
    _set(("other",), "x"),
    _each_item(_set(("annotations",), {"priority": 0.5})),
    _each_item(_set(("annotations",), None)),
    _each_item(_set(("_meta",), {"dev.example/k": None, "j": {"z": None}})),
    _each_item(_set(("_meta",), {"\ud800": 1})),
    _each_item(_set(("_meta",), "x")),
    _each_item(_set(("_meta",), None)),
    _each_item(_set(("type",), "video")),
    _each_item(_set(("text",), 3)),
    _each_item(_set(("mimeType",), None)),
    _each_item(_set(("size",), 10)),
    _each_item(_set(("icons",), None)),
    _each_item(_set(("title",), None)),
    _each_item(_set(("resource",), {"uri": "file:///x", "text": "t", "blob": "YQ=="})),
    _each_item(_set(("resource",), {"uri": "file:///x", "text": None})),
    _each_item(_set(("resource",), {"uri": "file:///x", "text": "t", "_meta": {"a": None}})),
    _each_item(_set(("resource",), {"uri": 3, "blob": "YQ=="})),
    _each_item(_drop("type")),
)
"""Changes that make a runtime's result into one it does not make: the SDK's to shape."""


@st.composite
def near_miss_results(draw: st.DrawFn) -> dict[str, Any]:
    """A runtime's result with one or two near misses."""
    wire = copy.deepcopy(draw(runtime_results()))
    for change in draw(st.lists(st.sampled_from(NEAR_MISSES), min_size=1, max_size=2)):
        # An earlier change may have taken away what this one changes.
        with contextlib.suppress(KeyError, TypeError):
            change(wire)
    return wire


@pytest.fixture(scope="module")
def answers() -> PlainAnswers:
    """The answers of an adapter of a real runtime (its shaping needs nothing running)."""
    module: ToolModule[None] = ToolModule("lean", lambda _context: None)

    async def made() -> PlainAnswers:
        async with open_runtime([module]) as runtime:
            return PlainAnswers(McpAdapter(runtime))

    return trio.run(made)


def _assert_shaped_as_the_sdk(answers: PlainAnswers, result: dict[str, Any], version: str) -> None:
    fast = _outcome(lambda: answers.call_result(copy.deepcopy(result), version))
    with mock.patch.object(_plain, "_call_result", side_effect=_plain._NotPlain):
        sdk = _outcome(lambda: answers.call_result(copy.deepcopy(result), version))
    assert fast == sdk


@settings(max_examples=600)
@given(
    runtime_results() | near_miss_results() | runtime_results().flatmap(nearly),
    st.sampled_from(VERSIONS),
)
def test_call_result_agrees_with_the_sdk(
    answers: PlainAnswers, result: dict[str, Any], version: str
) -> None:
    """For every result and version, `call_result` makes what the SDK's shaping makes: the
    same JSON, keys in the same order, or the same error."""
    _assert_shaped_as_the_sdk(answers, result, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("change", NEAR_MISSES)
@settings(max_examples=8)
@given(result=runtime_results())
def test_call_result_agrees_with_the_sdk_on_each_near_miss(
    answers: PlainAnswers, change: Callable[[dict[str, Any]], None], version: str, result: Any
) -> None:
    """Each near miss, in every version, is shaped as the SDK shapes it (or refused alike)."""
    with contextlib.suppress(KeyError, TypeError):  # a result without the changed part
        change(result)
    _assert_shaped_as_the_sdk(answers, result, version)


@settings(max_examples=200)
@given(runtime_results(), st.sampled_from(KNOWN_PROTOCOL_VERSIONS))
def test_call_result_shapes_what_the_runtime_makes_itself(
    answers: PlainAnswers, result: dict[str, Any], version: str
) -> None:
    """Every result the runtime makes is shaped without the SDK's models, in every era."""
    with _sdk_refused("serialize_server_result"):
        answers.call_result(result, version)


# ---- helpers ---------------------------------------------------------------------------


def _outcome(decide: Callable[[], object]) -> str:
    """What `decide` answers, as JSON (keys in its order); or the kind of error it raises
    (the SDK raises for some inputs: the fast way must then raise the same)."""
    try:
        return json.dumps(decide())
    except Exception as error:  # the kind is what is compared
        return f"raised {type(error).__name__}"


class _SdkAsked(AssertionError):
    """The SDK's function was called where the fast way should have answered."""


def _sdk_refused(name: str) -> mock._patch[Any]:
    """While active, the SDK's function `name`, as `_plain` calls it, fails the test."""
    module = spec_methods if name != "classify_inbound_request" else _plain

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise _SdkAsked(name)

    return mock.patch.object(module, name, refuse)
