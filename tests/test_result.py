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
    ServiceInfo,
    ToolName,
    ToolNameError,
    name_from_service,
    to_tool_result,
    unwrap,
)

from .strategies import json_values

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
        """to_wire produces the MCP CallToolResult fields."""
        wire = CallResult.both("hi", {"n": 1}).to_wire()
        assert wire == {
            "content": [{"type": "text", "text": "hi"}],
            "structuredContent": {"n": 1},
            "isError": False,
        }


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
