"""Every MCP content type in results, prompts and resource reads (protocol._content, ._result).

The wire shapes are checked against the official SDK's pydantic models: what `to_wire`
sends must validate there and come back unchanged, and `from_wire` must read back what
`to_wire` sent (through JSON too) for any result Hypothesis generates.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import (
    SERVICE_INFO_META_KEY,
    AudioContent,
    BackendType,
    CallResult,
    Content,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    PromptResult,
    ProtocolError,
    ResourceContents,
    ResourceLink,
    ResourceResult,
    ServiceInfo,
    TextContent,
    render_data,
    service_info_of,
    to_tool_result,
    unwrap,
)

from ..strategies import json_values

PLANNING = ServiceInfo("planning", "create_goal")
STORE = ServiceInfo("content_store", "add_content", BackendType.EXTERNAL)
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
WAV = b"RIFF$\x00\x00\x00WAVEfmt "


def sdk() -> Any:
    """The official SDK's wire types, ``mcp.types`` (the ``server`` extra)."""
    return pytest.importorskip("mcp.types")


def sdk_round_trip(model: Any, wire: dict[str, Any]) -> dict[str, Any]:
    """`wire` validated by the SDK's `model` and dumped back as the SDK would send it."""
    dumped: dict[str, Any] = model.model_validate(wire).model_dump(
        by_alias=True, exclude_unset=True, mode="json"
    )
    return dumped


# ---- strategies ----------------------------------------------------------------------

names = st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True)
services = st.none() | st.builds(ServiceInfo, names, names, st.sampled_from(BackendType))
media_types = st.sampled_from(
    ["image/png", "audio/wav", "text/html;profile=mcp-app", 'text/plain; charset="utf-8"']
) | st.from_regex(r"[a-z]{1,8}/[a-z0-9.+-]{1,12}", fullmatch=True)
# Printable text without control characters or surrogates (which JSON cannot carry).
printable = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=20)
uris = st.from_regex(r"[a-z]{1,8}://[A-Za-z0-9/._~%-]{0,20}", fullmatch=True) | printable.filter(
    bool
)
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)

resource_contents = st.one_of(
    st.builds(ResourceContents, uris, st.none() | media_types, text=texts),
    st.builds(ResourceContents, uris, st.none() | media_types, blob=st.binary(max_size=40)),
)
content_items: st.SearchStrategy[Content] = st.one_of(
    st.builds(TextContent, texts, services),
    st.builds(ImageContent, st.binary(max_size=40), media_types, services),
    st.builds(AudioContent, st.binary(max_size=40), media_types, services),
    st.builds(EmbeddedResource, resource_contents, services),
    st.builds(
        ResourceLink,
        uris,
        printable.filter(bool),
        st.none() | texts,
        st.none() | media_types,
        st.none() | texts,
        services,
    ),
)
data_objects = st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=4)


@st.composite
def call_results(draw: st.DrawFn) -> CallResult:
    """Results as `CallResult.of` builds them: any items (a str is text), optional data."""
    items = draw(st.lists(content_items | texts, max_size=5))
    return CallResult.of(*items, data=draw(data_objects), is_error=draw(st.booleans()))


prompt_messages = st.builds(PromptMessage, st.sampled_from(["user", "assistant"]), content_items)
prompt_results = st.builds(
    PromptResult, st.lists(prompt_messages, max_size=4).map(tuple), st.none() | texts
)
resource_results = st.builds(ResourceResult, st.lists(resource_contents, max_size=4).map(tuple))


def every_kind(service: ServiceInfo | None = None) -> tuple[Content, ...]:
    """One item of each content type (two embedded resources: text and blob)."""
    return (
        TextContent("a chart and its data", service),
        ImageContent(PNG, "image/png", service),
        AudioContent(WAV, "audio/wav", service),
        EmbeddedResource(ResourceContents("test://notes", "text/plain", text="hi"), service),
        EmbeddedResource(ResourceContents("test://raw", "application/octet-stream", blob=PNG)),
        ResourceLink("test://goal/1", "goal-1", "The first goal", "application/json"),
    )


# ---- wire shapes ---------------------------------------------------------------------


class TestWireShapes:
    def test_image(self) -> None:
        """An image is base64 data and its mimeType, as the conformance suite checks."""
        assert ImageContent(PNG, "image/png").to_wire() == {
            "type": "image",
            "data": base64.b64encode(PNG).decode(),
            "mimeType": "image/png",
        }

    def test_audio(self) -> None:
        """Audio is base64 data and its mimeType."""
        assert AudioContent(WAV, "audio/wav").to_wire() == {
            "type": "audio",
            "data": base64.b64encode(WAV).decode(),
            "mimeType": "audio/wav",
        }

    def test_embedded_text_resource(self) -> None:
        """An embedded text resource: ``{"type": "resource", "resource": {uri, mimeType, text}}``"""
        item = EmbeddedResource(ResourceContents("test://r", "text/plain", text="hello"))
        assert item.to_wire() == {
            "type": "resource",
            "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "hello"},
        }

    def test_embedded_blob_resource(self) -> None:
        """An embedded binary resource carries its bytes as a base64 ``blob``; no unset mimeType."""
        item = EmbeddedResource(ResourceContents("test://b", blob=b"\x00\xff"))
        assert item.to_wire() == {
            "type": "resource",
            "resource": {"uri": "test://b", "blob": "AP8="},
        }

    def test_resource_link(self) -> None:
        """A resource link names a resource; optional fields appear only when set."""
        assert ResourceLink("test://x", "x").to_wire() == {
            "type": "resource_link",
            "uri": "test://x",
            "name": "x",
        }
        full = ResourceLink("test://x", "x", "An x", "text/markdown", "The X")
        assert full.to_wire() == {
            "type": "resource_link",
            "uri": "test://x",
            "name": "x",
            "description": "An x",
            "mimeType": "text/markdown",
            "title": "The X",
        }

    def test_mixed_result(self) -> None:
        """Several items of different types in one result keep their order and types."""
        wire = CallResult.of(*every_kind()).to_wire()
        assert [item["type"] for item in wire["content"]] == [
            "text",
            "image",
            "audio",
            "resource",
            "resource",
            "resource_link",
        ]
        assert wire["isError"] is False
        assert "structuredContent" not in wire

    def test_every_type_is_accepted_by_the_sdk(self) -> None:
        """The SDK's CallToolResult validates a stamped result of every type and dumps it back."""
        types = sdk()
        wire = CallResult.of(*every_kind(), data={"n": 1}).stamped(PLANNING).to_wire()
        assert sdk_round_trip(types.CallToolResult, wire) == wire
        parsed = types.CallToolResult.model_validate(wire)
        kinds = [type(item).__name__ for item in parsed.content]
        assert kinds == [
            "TextContent",
            "ImageContent",
            "AudioContent",
            "EmbeddedResource",
            "EmbeddedResource",
            "ResourceLink",
            "TextContent",
        ]

    @given(call_results())
    def test_generated_results_are_accepted_by_the_sdk(self, result: CallResult) -> None:
        """Any result validates as the SDK's CallToolResult, and the SDK sends back the same."""
        wire = result.to_wire()
        assert sdk_round_trip(sdk().CallToolResult, wire) == wire

    @given(resource_results)
    def test_resource_results_are_accepted_by_the_sdk(self, result: ResourceResult) -> None:
        """A ResourceResult validates as the SDK's ReadResourceResult and comes back unchanged."""
        wire = result.to_wire()
        assert sdk_round_trip(sdk().ReadResourceResult, wire) == wire
        assert ResourceResult.from_wire(wire) == result

    @given(prompt_results)
    def test_prompt_results_are_accepted_by_the_sdk(self, result: PromptResult) -> None:
        """A PromptResult validates as the SDK's GetPromptResult and comes back unchanged."""
        wire = result.to_wire()
        assert sdk_round_trip(sdk().GetPromptResult, wire) == wire
        assert PromptResult.from_wire(wire) == result

    def test_prompt_result_shape(self) -> None:
        """``{"description"?, "messages": [{"role", "content": {...}}]}``."""
        result = PromptResult(
            (
                PromptMessage("user", TextContent("Describe this image")),
                PromptMessage("assistant", ImageContent(PNG, "image/png")),
            ),
            description="A picture prompt",
        )
        assert result.to_wire() == {
            "description": "A picture prompt",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Describe this image"}},
                {"role": "assistant", "content": ImageContent(PNG, "image/png").to_wire()},
            ],
        }
        assert "description" not in PromptResult(()).to_wire()

    def test_resource_result_shape(self) -> None:
        """``{"contents": [...]}``, text and blob contents alike."""
        result = ResourceResult(
            (ResourceContents("test://a", text="a"), ResourceContents("test://b", blob=b"b"))
        )
        assert result.to_wire() == {
            "contents": [{"uri": "test://a", "text": "a"}, {"uri": "test://b", "blob": "Yg=="}]
        }


# ---- round trips ---------------------------------------------------------------------


class TestRoundTrips:
    @given(call_results())
    def test_from_wire_reads_back_to_wire(self, result: CallResult) -> None:
        """from_wire(to_wire(x)) == x, directly and through a JSON encoding."""
        wire = result.to_wire()
        assert CallResult.from_wire(wire) == result
        assert CallResult.from_wire(json.loads(json.dumps(wire))) == result

    @given(call_results(), st.sampled_from([PLANNING, STORE]))
    def test_stamped_results_round_trip(self, result: CallResult, service: ServiceInfo) -> None:
        """A stamped result's provenance survives the wire, item by item."""
        stamped = result.stamped(service)
        assert CallResult.from_wire(json.loads(json.dumps(stamped.to_wire()))) == stamped

    @given(st.binary())
    def test_bytes_survive_base64(self, data: bytes) -> None:
        """Any bytes go out as base64 and come back identical, in every binary field."""
        result = CallResult.of(
            ImageContent(data, "image/png"),
            AudioContent(data, "audio/wav"),
            EmbeddedResource(ResourceContents("test://b", blob=data)),
        )
        wire = result.to_wire()
        sent = [wire["content"][0]["data"], wire["content"][1]["data"]]
        sent.append(wire["content"][2]["resource"]["blob"])
        assert [base64.b64decode(text, validate=True) for text in sent] == [data] * 3
        assert CallResult.from_wire(wire) == result
        assert ResourceContents.from_wire(wire["content"][2]["resource"]).blob == data

    @given(prompt_messages)
    def test_prompt_message_round_trip(self, message: PromptMessage) -> None:
        """A PromptMessage reads back what it sent."""
        assert PromptMessage.from_wire(json.loads(json.dumps(message.to_wire()))) == message

    def test_items_without_provenance_get_the_given_service(self) -> None:
        """As the cluster needs: an item's own ServiceInfo wins, else the one passed in."""
        wire = {
            "content": [
                TextContent("mine", STORE).to_wire(),
                TextContent("no meta").to_wire(),
                ImageContent(PNG, "image/png").to_wire(),
            ],
            "isError": False,
        }
        result = CallResult.from_wire(wire, PLANNING)
        assert [item.service for item in result.content] == [STORE, PLANNING, PLANNING]

    def test_text_results_read_back_as_before(self) -> None:
        """A text or data result from a shard reads back as the cluster rebuilt it before."""
        for sent in (CallResult.text("x"), CallResult.both("s", {"a": 1}), CallResult.error("no")):
            back = CallResult.from_wire(sent.stamped(PLANNING).to_wire(), PLANNING)
            assert back == sent.stamped(PLANNING)
            assert back.to_wire() == sent.stamped(PLANNING).to_wire()

    def test_missing_is_error_means_false(self) -> None:
        """isError is optional in MCP: absent, the result is not an error."""
        assert CallResult.from_wire({"content": []}) == CallResult(())


# ---- stamping, data rendering, first_text ----------------------------------------------


class TestStamping:
    def test_stamping_marks_every_type(self) -> None:
        """stamped() gives every item, whatever its type, the ServiceInfo, on the wire too."""
        result = CallResult.of(*every_kind(STORE)).stamped(PLANNING)
        assert [item.service for item in result.content] == [PLANNING] * 6
        for item in result.to_wire()["content"]:
            assert item["_meta"] == {SERVICE_INFO_META_KEY: PLANNING.to_wire()}
            assert service_info_of(item) == PLANNING

    def test_stamping_keeps_everything_else(self) -> None:
        """Only the provenance changes: types, payloads, data and the error flag stay."""
        result = CallResult.of(*every_kind(), data={"a": 1}, is_error=True)
        stamped = result.stamped(PLANNING)
        assert [item.stamped(PLANNING) for item in result.content] == list(stamped.content)
        assert (stamped.structured_content, stamped.is_error) == ({"a": 1}, True)

    def test_sdk_items_read_their_provenance(self) -> None:
        """service_info_of reads the ServiceInfo of every SDK-parsed item type."""
        types = sdk()
        wire = CallResult.of(*every_kind()).stamped(PLANNING).to_wire()
        parsed = types.CallToolResult.model_validate(wire)
        assert [service_info_of(item) for item in parsed.content] == [PLANNING] * 6


class TestDataRendering:
    def test_of_renders_the_data_after_the_items(self) -> None:
        """With data, the last item is its JSON rendering, after items of any type."""
        result = CallResult.of("chart", ImageContent(PNG, "image/png"), data={"n": 2})
        assert result.content[-1] == TextContent(render_data({"n": 2}))
        assert len(result.to_wire()["content"]) == 3  # rendered once, not again on the wire

    def test_rendering_carries_the_provenance_of_a_non_text_last_item(self) -> None:
        """A result built without the rendering gets it, stamped like its last item (an image)."""
        result = CallResult((ImageContent(PNG, "image/png", STORE),), {"n": 1})
        last = result.to_wire()["content"][-1]
        assert json.loads(last["text"]) == {"n": 1}
        assert service_info_of(last) == STORE

    def test_a_non_text_item_is_never_taken_for_the_rendering(self) -> None:
        """Only a text item equal to the rendering counts as it; a resource holding it does not."""
        rendering = render_data({"n": 1})
        resource = EmbeddedResource(
            ResourceContents("test://d", "application/json", text=rendering)
        )
        wire = CallResult((resource,), {"n": 1}).to_wire()
        assert [item["type"] for item in wire["content"]] == ["resource", "text"]

    @given(call_results())
    def test_the_text_carries_the_data_whatever_the_items(self, result: CallResult) -> None:
        """Any result with data ends, on the wire, with a text item holding all of it as JSON."""
        wire = result.to_wire()
        if result.structured_content is not None:
            assert wire["content"][-1]["type"] == "text"
            assert json.loads(wire["content"][-1]["text"]) == json.loads(
                render_data(result.structured_content)
            )


class TestFirstText:
    def test_skips_items_that_are_not_text(self) -> None:
        """first_text is the first *text* item's text, after any images or resources."""
        result = CallResult.of(ImageContent(PNG, "image/png"), "caption", "more")
        assert result.first_text == "caption"

    @pytest.mark.parametrize("items", [(), (ImageContent(PNG, "image/png"),)])
    def test_empty_without_a_text_item(self, items: tuple[Content, ...]) -> None:
        """No text item at all: first_text is ``""``."""
        assert CallResult.of(*items).first_text == ""

    def test_existing_constructors_unchanged(self) -> None:
        """text, data, both and error build exactly what they did."""
        assert CallResult.text("x") == CallResult((TextContent("x"),))
        assert CallResult.error("bad") == CallResult((TextContent("bad"),), None, is_error=True)
        assert CallResult.data({"a": 1}).first_text == render_data({"a": 1})
        assert CallResult.both("s", {"a": 1}).content == CallResult.of("s", data={"a": 1}).content
        assert CallResult.both("", {"a": 1}) == CallResult.data({"a": 1})


# ---- the client-side helpers -----------------------------------------------------------


class TestClientHelpers:
    """to_tool_result, unwrap and service_info_of on results that hold more than text."""

    def test_structured_content_still_wins(self) -> None:
        """With data, unwrap returns it, whatever items come first."""
        wire = CallResult.of(ImageContent(PNG, "image/png"), data={"n": 1}).to_wire()
        assert unwrap(wire) == {"n": 1}
        assert to_tool_result(wire).data == {"n": 1}

    def test_a_leading_text_item_is_still_read(self) -> None:
        """Text first, then an image: the text is the ToolResult's text and what unwrap returns."""
        wire = CallResult.of('{"n": 1}', ImageContent(PNG, "image/png")).to_wire()
        assert to_tool_result(wire).text == '{"n": 1}'
        assert unwrap(wire) == {"n": 1}

    def test_a_leading_non_text_item_leaves_the_raw_result(self) -> None:
        """An image first: ToolResult.text is None and unwrap returns the whole result.

        Both read only a text item in first place (as documented): the raw
        result keeps the image a program would otherwise lose.
        """
        wire = CallResult.of(ImageContent(PNG, "image/png"), "caption").to_wire()
        assert to_tool_result(wire).text is None
        assert unwrap(wire) is wire

    def test_service_info_of_reads_every_type(self) -> None:
        """The ServiceInfo of every item type on the wire is what it was stamped with."""
        for item in CallResult.of(*every_kind()).stamped(STORE).to_wire()["content"]:
            assert service_info_of(item) == STORE
        assert service_info_of(ImageContent(PNG, "image/png").to_wire()) is None


# ---- bad input -----------------------------------------------------------------------


class TestBadInput:
    @pytest.mark.parametrize(
        ("build", "error", "names"),
        [
            (lambda: ImageContent(PNG, ""), ValueError, "ImageContent.mime_type"),
            (lambda: ImageContent(PNG, "png"), ValueError, "ImageContent.mime_type"),
            (lambda: ImageContent(PNG, "image/png extra"), ValueError, "ImageContent.mime_type"),
            (lambda: AudioContent(WAV, "audio/"), ValueError, "AudioContent.mime_type"),
            (lambda: ImageContent("iVBORw==", "image/png"), TypeError, "ImageContent.data"),
            (lambda: AudioContent(bytearray(WAV), "audio/wav"), TypeError, "AudioContent.data"),
            (lambda: ImageContent(PNG, 3), TypeError, "ImageContent.mime_type"),
            (lambda: ImageContent(PNG, "image/png", "me"), TypeError, "ImageContent.service"),
            (lambda: ResourceContents("", text="x"), ValueError, "ResourceContents.uri"),
            (lambda: ResourceContents("a\nb", text="x"), ValueError, "ResourceContents.uri"),
            (lambda: ResourceContents("test://r"), ValueError, "neither"),
            (lambda: ResourceContents("test://r", text="x", blob=b"x"), ValueError, "both"),
            (lambda: ResourceContents("test://r", blob="eA=="), TypeError, "ResourceContents.blob"),
            (lambda: ResourceContents("test://r", "", text="x"), ValueError, "mime_type"),
            (lambda: ResourceLink("", "x"), ValueError, "ResourceLink.uri"),
            (lambda: ResourceLink("test://x", ""), ValueError, "ResourceLink.name"),
            (lambda: ResourceLink("test://x", "x", mime_type="x"), ValueError, "mime_type"),
            (lambda: ResourceLink("test://x", "x", title=1), TypeError, "ResourceLink.title"),
            (lambda: EmbeddedResource("test://x"), TypeError, "resource"),
            (lambda: PromptMessage("system", TextContent("x")), ValueError, "PromptMessage.role"),
            (lambda: PromptMessage("user", "hi"), TypeError, "PromptMessage.content"),
            (lambda: PromptResult([]), TypeError, "PromptResult.messages"),
            (lambda: PromptResult((), description=1), TypeError, "PromptResult.description"),
            (lambda: ResourceResult((TextContent("x"),)), TypeError, "ResourceResult.contents[0]"),
            (lambda: CallResult.of("ok", 3), TypeError, "items[1]"),
            (lambda: CallResult.of(data=[1]), TypeError, "data"),
        ],
    )
    def test_constructors_name_the_field(
        self, build: Any, error: type[Exception], names: str
    ) -> None:
        """A bad value is refused where it is made, with an error naming its field."""
        with pytest.raises(error, match=names.replace(".", r"\.").replace("[", r"\[")):
            build()

    def test_media_types_with_parameters_are_accepted(self) -> None:
        """``type/subtype`` may carry parameters (MCP Apps use ``text/html;profile=mcp-app``)."""
        for mime in ("text/html;profile=mcp-app", 'text/plain; charset="utf-8"', "image/svg+xml"):
            assert ImageContent(b"", mime).mime_type == mime

    @pytest.mark.parametrize(
        ("wire", "names"),
        [
            ([], "a tool result must be an object"),
            ({}, "a tool result has no 'content'"),
            ({"content": "hi"}, "content must be a list"),
            ({"content": ["hi"]}, r"content\[0\] must be an object"),
            ({"content": [{"text": "x"}]}, r"content\[0\] has no 'type'"),
            ({"content": [{"type": "video"}]}, r"content\[0\]\.type must be"),
            ({"content": [{"type": "text"}]}, r"content\[0\] has no 'text'"),
            ({"content": [{"type": "text", "text": 1}]}, r"content\[0\]\.text must be a string"),
            (
                {"content": [{"type": "image", "data": "not base64!", "mimeType": "image/png"}]},
                r"content\[0\]\.data is not base64",
            ),
            (
                {"content": [{"type": "image", "data": "aGk", "mimeType": "image/png"}]},
                r"content\[0\]\.data is not base64",
            ),
            (
                {"content": [{"type": "audio", "data": "aGk=\n", "mimeType": "audio/wav"}]},
                r"content\[0\]\.data is not base64",
            ),
            (
                {"content": [{"type": "audio", "data": "aGk=", "mimeType": "wav"}]},
                r"content\[0\]\.mimeType must be a media type",
            ),
            ({"content": [{"type": "image", "data": "aGk="}]}, r"content\[0\] has no 'mimeType'"),
            ({"content": [{"type": "resource"}]}, r"content\[0\] has no 'resource'"),
            (
                {
                    "content": [
                        {"type": "resource", "resource": {"uri": "u", "text": "", "blob": ""}}
                    ]
                },
                r"content\[0\]\.resource must have exactly one of 'text' and 'blob', got both",
            ),
            (
                {"content": [{"type": "resource", "resource": {"uri": "", "text": "x"}}]},
                r"content\[0\]\.resource\.uri must be a URI",
            ),
            (
                {"content": [{"type": "resource_link", "uri": "test://x"}]},
                r"content\[0\] has no 'name'",
            ),
            (
                {"content": [{"type": "text", "text": "x", "_meta": {SERVICE_INFO_META_KEY: 1}}]},
                r"content\[0\]: _meta\[.*\] must be an object",
            ),
            ({"content": [], "structuredContent": [1]}, "structuredContent must be an object"),
            ({"content": [], "isError": "no"}, "isError must be a boolean"),
        ],
    )
    def test_malformed_wire_results_name_the_field(self, wire: Any, names: str) -> None:
        """from_wire raises ProtocolError naming what is malformed, never guessing."""
        with pytest.raises(ProtocolError, match=names):
            CallResult.from_wire(wire)

    @pytest.mark.parametrize(
        ("read", "wire", "names"),
        [
            (ResourceResult.from_wire, {}, "has no 'contents'"),
            (
                ResourceResult.from_wire,
                {"contents": [{"uri": "a", "text": "a"}, {"uri": "b", "blob": "é"}]},
                r"contents\[1\]\.blob is not base64",
            ),
            (ResourceResult.from_wire, {"contents": [{"uri": "a"}]}, "got neither"),
            (PromptResult.from_wire, {"messages": {}}, "messages must be a list"),
            (
                PromptResult.from_wire,
                {"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]},
                r"messages\[0\]\.role must be 'user' or 'assistant'",
            ),
            (
                PromptResult.from_wire,
                {"messages": [{"role": "user", "content": {"type": "file"}}]},
                r"messages\[0\]\.content\.type must be",
            ),
            (PromptResult.from_wire, {"messages": [], "description": 3}, "description must be"),
            (PromptMessage.from_wire, {"role": "user"}, "message has no 'content'"),
            (ResourceContents.from_wire, {"text": "x"}, "contents has no 'uri'"),
        ],
    )
    def test_malformed_prompts_and_resources_name_the_field(
        self, read: Any, wire: Any, names: str
    ) -> None:
        """The readers of prompts and resource reads name the malformed field too."""
        with pytest.raises(ProtocolError, match=names):
            read(wire)


def test_content_is_the_union_of_the_item_types() -> None:
    """``Content`` is a runtime union: every item type is one, a ResourceContents is not."""
    assert all(isinstance(item, Content) for item in every_kind())
    assert not isinstance(ResourceContents("test://r", text="x"), Content)
