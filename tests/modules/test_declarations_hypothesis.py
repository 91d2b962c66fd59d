"""Over generated handler signatures: a declaration is refused at once, or serves every call.

Each handler is built from parameters and a return annotation drawn from pools of types a
tool can serve (some with pydantic ``Field`` bounds) and types it cannot, with or without a
state parameter. A handler with an unservable type must be refused when declared; any
other must answer every call whose arguments its listed schema admits, with a result whose
structured content its output schema admits.
"""

from __future__ import annotations

from typing import Annotated, Any

import attrs
import jsonschema
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field

from actors import ToolModule, open_runtime


@attrs.define
class Kept:
    """The generated modules' state."""

    calls: int = 0


@attrs.frozen
class Kind:
    """A parameter or return type, whether a tool can serve it, and values of it."""

    annotation: Any
    servable: bool
    values: st.SearchStrategy[Any]


ARGUMENTS = [
    Kind(int, True, st.integers(-(10**6), 10**6)),
    Kind(str, True, st.text(max_size=8)),
    Kind(bool, True, st.booleans()),
    Kind(float, True, st.floats(allow_nan=False, allow_infinity=False)),
    Kind(list[int], True, st.lists(st.integers(-9, 9), max_size=4)),
    Kind(Annotated[int, Field(ge=0, le=100)], True, st.integers(0, 100)),
    Kind(Annotated[str, Field(min_length=1, max_length=5)], True, st.text(min_size=1, max_size=5)),
    Kind(set[int], False, st.nothing()),
    Kind(complex, False, st.nothing()),
    Kind(Annotated[int, Field(alias="other")], False, st.nothing()),
]
RETURNS = [
    Kind(int, True, st.integers()),
    Kind(str, True, st.text(max_size=8)),
    Kind(list[str], True, st.lists(st.text(max_size=3), max_size=3)),
    Kind(bool, True, st.booleans()),
    Kind(None, True, st.none()),
    Kind(dict[str, int], True, st.dictionaries(st.text(max_size=3), st.integers(), max_size=3)),
    Kind(set[int], False, st.nothing()),
]


@st.composite
def declarations(draw: st.DrawFn) -> tuple[bool, list[Kind], Kind, Any]:
    """Whether the handler takes the state, its parameters' kinds, its return's, a value."""
    with_state = draw(st.booleans())
    parameters = draw(st.lists(st.sampled_from(ARGUMENTS), max_size=3))
    returned = draw(st.sampled_from(RETURNS))
    value = draw(returned.values) if returned.servable else None
    return with_state, parameters, returned, value


def handler_of(with_state: bool, parameters: list[Kind], returned: Kind, value: Any) -> Any:
    """A real function with that signature, returning `value` whatever it is given."""
    names = [f"p{index}" for index in range(len(parameters))]
    listed = (["state: Kept"] if with_state else []) + [f"{n}: t_{n}" for n in names]
    source = f"def generated({', '.join(listed)}) -> returned:\n    return value\n"
    namespace: dict[str, Any] = {"Kept": Kept, "returned": returned.annotation, "value": value}
    namespace.update({f"t_{n}": kind.annotation for n, kind in zip(names, parameters, strict=True)})
    exec(source, namespace)
    function = namespace["generated"]
    function.__doc__ = "A generated tool."
    return function


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(declarations(), st.data())
def test_a_declaration_is_refused_at_once_or_serves_every_admitted_call(
    declaration: tuple[bool, list[Kind], Kind, Any], data: st.DataObject
) -> None:
    with_state, parameters, returned, value = declaration
    module = ToolModule("generated", Kept)
    servable = returned.servable and all(kind.servable for kind in parameters)
    try:
        module.tool(handler_of(with_state, parameters, returned, value))
    except TypeError:
        assert not servable, "a servable signature was refused"
        return
    assert servable, "an unservable signature was accepted"
    tool = module.tools["generated"]
    arguments = {
        name: data.draw(kind.values, label=name)
        for name, kind in zip(tool.input_schema["properties"], parameters, strict=True)
    }
    jsonschema.validate(arguments, tool.input_schema)  # what the listing admits

    async def call() -> None:
        async with open_runtime([module]) as runtime:
            result = await runtime.call_tool(
                "generated__generated", {**arguments, "__sessionId": "s"}
            )
        assert not result.is_error, result.first_text
        if tool.output_schema is not None:
            jsonschema.validate(result.structured_content, tool.output_schema)

    trio.run(call)
