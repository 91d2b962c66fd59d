"""Results, the unwrap order and provenance (protocol._result, protocol._names)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import (
    SERVICE_INFO_META_KEY,
    BackendType,
    CallResult,
    ProtocolError,
    ServiceInfo,
    TextContent,
    ToolName,
    ToolNameError,
    name_from_service,
    service_info_of,
    to_tool_result,
    unwrap,
)

from ..strategies import json_values

data_objects = st.dictionaries(st.text(max_size=5), json_values, min_size=1, max_size=4)
PLANNING = ServiceInfo("planning", "create_goal", BackendType.BUILTIN)


class TestUnwrap:
    @given(data_objects, st.text())
    def test_structured_content_comes_first(self, data: dict[str, Any], text: str) -> None:
        """With structuredContent present, unwrap returns it whatever the text says."""
        raw = {"content": [{"type": "text", "text": text}], "structuredContent": data}
        assert unwrap(raw) == data

    @given(json_values.filter(lambda v: v is not None))
    def test_json_text_is_parsed(self, value: Any) -> None:
        """Without structuredContent, a JSON first text item is parsed."""
        raw = {"content": [{"type": "text", "text": json.dumps(value)}]}
        assert unwrap(raw) == value

    @given(st.text(min_size=1).filter(lambda t: not _is_json(t)))
    def test_plain_text_is_returned_as_text(self, text: str) -> None:
        """A first text item that is not JSON comes back as the string."""
        assert unwrap({"content": [{"type": "text", "text": text}]}) == text

    @pytest.mark.parametrize(
        "raw",
        [{}, {"content": []}, {"content": [{"type": "image", "data": "..."}]}, {"isError": True}],
    )
    def test_otherwise_the_raw_result(self, raw: dict[str, Any]) -> None:
        """With neither data nor a text first item, the raw result is returned."""
        assert unwrap(raw) is raw

    @given(data_objects, st.text(min_size=1))
    def test_tool_result_keeps_both_channels(self, data: dict[str, Any], text: str) -> None:
        """ToolResult carries text, data and the raw mapping at once."""
        raw = {"content": [{"type": "text", "text": text}], "structuredContent": data}
        result = to_tool_result(raw)
        assert (result.text, result.data, result.raw) == (text, data, raw)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class TestCallResult:
    def test_data_results_carry_a_readable_text_rendering(self) -> None:
        """A data-only result also has its JSON as text, as the MCP spec recommends."""
        result = CallResult.data({"storeId": "st_1"})
        assert json.loads(result.first_text) == {"storeId": "st_1"}
        assert result.structured_content == {"storeId": "st_1"}

    def test_stamping_marks_every_item(self) -> None:
        """Every content item of a stamped result carries the ServiceInfo on the wire."""
        result = CallResult((CallResult.text("a").content[0],) * 2).stamped(PLANNING)
        wire = result.to_wire()
        metas = [item["_meta"][SERVICE_INFO_META_KEY] for item in wire["content"]]
        assert (
            metas
            == [{"serverName": "planning", "toolName": "create_goal", "backendType": "builtin"}] * 2
        )

    def test_results_of_different_modules_stay_distinguishable(self) -> None:
        """Items from two modules in one message keep their own provenance."""
        store = ServiceInfo("content_store", "add_content")
        items = [
            *CallResult.text("goal").stamped(PLANNING).content,
            *CallResult.text("stored").stamped(store).content,
        ]
        assert [item.service for item in items] == [PLANNING, store]

    def test_wire_shape(self) -> None:
        """to_wire produces the MCP CallToolResult fields: summary, then the data as JSON."""
        wire = CallResult.both("hi", {"n": 1}).to_wire()
        assert wire == {
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "text", "text": '{\n  "n": 1\n}'},
            ],
            "structuredContent": {"n": 1},
            "isError": False,
        }

    @given(st.text(), data_objects)
    def test_the_text_carries_every_field_of_the_data(
        self, summary: str, data: dict[str, Any]
    ) -> None:
        """A text-only client loses nothing: the last text item is the whole data as JSON."""
        wire = CallResult.both(summary, data).to_wire()
        assert json.loads(wire["content"][-1]["text"]) == data
        assert unwrap(wire) == data  # the unwrap order still prefers structuredContent
        if summary:
            assert to_tool_result(wire).text == summary  # the summary stays first

    def test_a_result_built_without_the_json_gets_it_on_the_wire(self) -> None:
        """A handler's own CallResult with data but no rendering still sends it as text."""
        result = CallResult((TextContent("3 items"),), {"count": 3}).stamped(PLANNING)
        content = result.to_wire()["content"]
        assert [json.loads(item["text"]) for item in content[1:]] == [{"count": 3}]
        assert content[1]["_meta"][SERVICE_INFO_META_KEY]["toolName"] == "create_goal"

    def test_the_json_is_not_sent_twice(self) -> None:
        """A result whose last item already is the rendering gets no second copy."""
        for result in (CallResult.data({"a": 1}), CallResult.both("s", {"a": 1})):
            wire = result.stamped(PLANNING).to_wire()
            assert [item["text"] for item in wire["content"]].count('{\n  "a": 1\n}') == 1


class TestServiceInfoOf:
    def test_reads_back_what_the_server_stamped(self) -> None:
        """The ServiceInfo of a received wire item is the one its result was stamped with."""
        for item in CallResult.both("x", {"n": 1}).stamped(PLANNING).to_wire()["content"]:
            assert service_info_of(item) == PLANNING

    def test_an_sdk_item_is_read_through_its_meta_attribute(self) -> None:
        """An item the MCP SDK client parsed (``meta`` attribute) works as well."""
        mcp_types = pytest.importorskip("mcp.types")
        wire = CallResult.text("x").stamped(PLANNING).to_wire()["content"][0]
        assert service_info_of(mcp_types.TextContent.model_validate(wire)) == PLANNING

    @pytest.mark.parametrize("item", [{"type": "text", "text": "x"}, {"_meta": {"other": 1}}])
    def test_an_unstamped_item_has_none(self, item: dict[str, Any]) -> None:
        """No ServiceInfo is not an error: the item came from elsewhere."""
        assert service_info_of(item) is None

    @pytest.mark.parametrize(
        ("meta", "problem"),
        [
            ([], "_meta must be an object"),
            ({SERVICE_INFO_META_KEY: "planning"}, "must be an object"),
            ({SERVICE_INFO_META_KEY: {"serverName": "p", "toolName": "t"}}, "no 'backendType'"),
            (
                {
                    SERVICE_INFO_META_KEY: {
                        "serverName": "p",
                        "toolName": 7,
                        "backendType": "builtin",
                    }
                },
                "toolName must be a string",
            ),
            (
                {
                    SERVICE_INFO_META_KEY: {
                        "serverName": "p\nx",
                        "toolName": "t",
                        "backendType": "builtin",
                    }
                },
                "serverName .* is not a tool or server name",
            ),
            (
                {SERVICE_INFO_META_KEY: {"serverName": "p", "toolName": "t", "backendType": "x"}},
                "backendType must be one of",
            ),
        ],
    )
    def test_a_malformed_service_info_is_refused_by_name(self, meta: object, problem: str) -> None:
        """A wrong ServiceInfo would re-call the wrong tool: it is refused, never guessed."""
        with pytest.raises(ProtocolError, match=problem):
            service_info_of({"type": "text", "text": "x", "_meta": meta})


class TestToolNames:
    @pytest.mark.parametrize(
        ("name", "server", "tool", "backend"),
        [
            ("filesystem__read_file", "filesystem", "read_file", BackendType.EXTERNAL),
            ("builtin.planning__create_todo", "planning", "create_todo", BackendType.BUILTIN),
            ("a__b__c", "a", "b__c", BackendType.EXTERNAL),
        ],
    )
    def test_parse_and_format_round_trip(
        self, name: str, server: str, tool: str, backend: BackendType
    ) -> None:
        """Full names parse into their parts and format back to themselves."""
        parsed = ToolName.parse(name)
        assert (parsed.server, parsed.tool, parsed.backend_type) == (server, tool, backend)
        assert str(parsed) == name

    @pytest.mark.parametrize("name", ["read_file", "__x", "x__", "builtin.x"])
    def test_a_name_that_is_not_full_is_refused(self, name: str) -> None:
        """Parsing a base name or a half name says what a full name looks like."""
        with pytest.raises(
            ToolNameError, match=r"is not a full tool name; expected 'server__tool'"
        ):
            ToolName.parse(name)

    def test_base_name_resolves_through_service_info(self) -> None:
        """A UI re-calling a tool by base name: the result's ServiceInfo gives the full name."""
        assert name_from_service("list_goals", PLANNING) == "builtin.planning__list_goals"
        external = ServiceInfo("filesystem", "read_file", BackendType.EXTERNAL)
        assert name_from_service("write_file", external) == "filesystem__write_file"

    @pytest.mark.parametrize("name", ["tauri:open_window", "filesystem__read_file"])
    def test_scheme_and_full_names_pass_through(self, name: str) -> None:
        """`tauri:` commands and names that are already full are left untouched."""
        assert name_from_service(name, PLANNING) == name

    def test_builtin_names_are_already_full(self) -> None:
        """``builtin.x`` is a full name of the builtin backend, never prefixed with a server."""
        external = ServiceInfo("filesystem", "read_file", BackendType.EXTERNAL)
        assert name_from_service("builtin.foo", external) == "builtin.foo"

    @pytest.mark.parametrize("name", ["list_goals", "builtin.foo", "a__b", "tauri:x"])
    def test_without_a_service_info_the_name_is_kept(self, name: str) -> None:
        """Nothing to resolve with: the name is returned as it is, not an AttributeError."""
        assert name_from_service(name, None) == name
