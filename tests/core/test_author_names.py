"""An author's names come from `actors`; an integrator's from `actors.lowlevel`, the old way warned.

`actors` re-exports what a handler reads and returns from `protocol` as the same objects, so
``isinstance`` and ``except`` agree whichever spelling a module uses.
"""

from __future__ import annotations

import pytest

import actors
import protocol
from actors import lowlevel

FROM_PROTOCOL = (
    "Scope",
    "ToolContext",
    "CallResult",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "EmbeddedResource",
    "ResourceLink",
    "PromptMessage",
    "PromptResult",
)


@pytest.mark.parametrize("name", FROM_PROTOCOL)
def test_an_authors_protocol_name_is_the_protocol_object(name: str) -> None:
    assert name in actors.__all__
    assert getattr(actors, name) is getattr(protocol, name)


def test_the_author_list_starts_with_what_a_module_uses_first() -> None:
    first = ["ToolModule", "Durable", "Scope", "ToolContext", "CallResult", "ToolError"]
    assert actors.__all__[: len(first)] == first


@pytest.mark.parametrize("name", lowlevel.__all__)
def test_an_integrators_name_is_only_in_lowlevel(name: str) -> None:
    assert name not in actors.__all__


@pytest.mark.parametrize("name", lowlevel.__all__)
def test_the_old_spelling_warns_naming_the_new_and_gives_the_same_object(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"`from actors\.lowlevel import {name}`"):
        old = getattr(actors, name)
    assert old is getattr(lowlevel, name)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'actors' has no attribute 'prepare_cal'"):
        _ = actors.prepare_cal  # type: ignore[attr-defined]
