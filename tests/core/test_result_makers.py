"""The results made on every call without their frozen ``__init__`` (protocol._result).

`CallResult.text`, `CallResult.stamped` and `TextContent.stamped` set the slots of the
frozen classes directly, to save a call's CPU: what they make must be exactly what the
constructors make, field by field (the ones equality skips included), and still frozen.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import BackendType, CallResult, ServiceInfo, TextContent
from protocol._content import _slot_setters

from ..strategies import json_values

names = st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True)
services = st.builds(ServiceInfo, names, names, st.sampled_from(BackendType))
texts = st.text(max_size=30)
data_objects = st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=3)


def _slots(instance: attrs.AttrsInstance) -> dict[str, Any]:
    """Every field of an attrs instance, the ones equality and repr leave out included."""
    return {field.name: getattr(instance, field.name) for field in attrs.fields(type(instance))}


def _text(item: object) -> str:
    assert isinstance(item, TextContent)
    return item.text


def _same(made: CallResult, built: CallResult) -> None:
    assert type(made) is CallResult
    assert made == built
    assert _slots(made) == _slots(built)
    assert [_slots(item) for item in made.content] == [_slots(item) for item in built.content]
    assert [type(item) for item in made.content] == [type(item) for item in built.content]
    assert repr(made) == repr(built)
    assert made.to_wire() == built.to_wire()


class TestCallResultText:
    @given(texts, st.none() | services)
    def test_it_is_what_the_constructors_make(self, text: str, service: ServiceInfo | None) -> None:
        _same(CallResult.text(text, service), CallResult((TextContent(text, service),)))

    @given(texts)
    def test_without_a_service_the_item_is_not_stamped(self, text: str) -> None:
        result = CallResult.text(text)
        _same(result, CallResult((TextContent(text),)))
        assert result.content[0].service is None

    def test_it_stays_frozen(self) -> None:
        result = CallResult.text("ok")
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            result.is_error = True  # type: ignore[misc]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            result.content[0].text = "changed"  # type: ignore[misc,union-attr]
        assert result.first_text == "ok"
        assert not result.is_error


class TestStamped:
    @given(st.lists(texts, max_size=3), data_objects, st.booleans(), services)
    def test_a_stamped_result_is_what_the_constructors_make(
        self, items: list[str], data: dict[str, Any] | None, is_error: bool, service: ServiceInfo
    ) -> None:
        result = CallResult.of(*items, data=data, is_error=is_error)
        built = CallResult(
            tuple(TextContent(_text(item), service) for item in result.content),
            result.structured_content,
            result.is_error,
            _renders_data=result._renders_data,
        )
        _same(result.stamped(service), built)

    @given(texts, services)
    def test_a_stamped_text_item_is_the_constructors(self, text: str, service: ServiceInfo) -> None:
        made = TextContent(text).stamped(service)
        assert _slots(made) == _slots(TextContent(text, service))
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            made.text = "changed"  # type: ignore[misc]


class TestSlotSetters:
    @pytest.mark.parametrize(
        "fields",
        [("text",), ("service", "text"), ("text", "service", "extra")],
        ids=["one missing", "out of order", "one too many"],
    )
    def test_a_maker_must_name_every_field_in_order(self, fields: tuple[str, ...]) -> None:
        """A field added to a class later fails at import, not as an unset slot at a call."""
        with pytest.raises(TypeError, match=r"TextContent's fields are \('text', 'service'\)"):
            _slot_setters(TextContent, *fields)
