"""The ``playbook_store`` module: playbooks shared by a session, owned by assistants.

State is per session, so the assistants of a session share one store, and the
module enforces ownership: a playbook belongs to the assistant that created
it. A call that names no assistant is not checked: it acts for the host (the
application itself, not one of its assistants) and sees every playbook.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import attrs
import cattrs

from protocol import CallResult, Scope, ToolContext

from .._durable import Durable
from .._errors import ToolError
from .._module import ToolModule

__all__ = ["PlaybookStoreState", "playbook_store"]


@attrs.frozen
class Playbook:
    """One playbook and its owner."""

    id: str
    """Unique within the session."""
    name: str
    """What the creator called it."""
    owner: str | None
    """The assistant that created it; ``None`` when the host created it."""

    def to_data(self) -> dict[str, Any]:
        """The structured form returned to callers."""
        return {"id": self.id, "name": self.name, "owner": self.owner}


class _PlaybookData(TypedDict):
    """A playbook as callers see it (`Playbook.to_data`): the data of create_playbook."""

    id: str
    name: str
    owner: str | None


class _SelectedData(TypedDict):
    """The data of select_playbook."""

    selected: str


class _PlaybooksData(TypedDict):
    """The data of list_playbooks."""

    playbooks: list[_PlaybookData]
    count: int


_Selections = dict[str | None, str]
"""Assistant (None for the host) → the playbook it selected."""


@attrs.define
class PlaybookStoreState:
    """The playbooks of one session, by id, and the id of the selected one per assistant."""

    playbooks: dict[str, Playbook] = attrs.field(factory=dict)
    """Playbook id → playbook."""
    selected: _Selections = attrs.field(factory=dict)
    """Assistant (None for the host) → the playbook it selected."""


def _new_store(_context: ToolContext) -> PlaybookStoreState:
    return PlaybookStoreState()


def _stored_form() -> cattrs.Converter:
    """The strict converter, with selections stored as pairs: JSON keys cannot be null."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_unstructure_hook_func(
        lambda kind: kind == _Selections, lambda selections: list(selections.items())
    )
    converter.register_structure_hook_func(
        lambda kind: kind == _Selections,
        lambda pairs, _kind: dict(converter.structure(pairs, list[tuple[str | None, str]])),
    )
    return converter


playbook_store: ToolModule[PlaybookStoreState] = ToolModule(
    "playbook_store",
    _new_store,
    scope=Scope.SESSION,
    description="Playbooks shared within a session, each owned by the assistant that made it.",
    # Each playbook is a part; the selections, small, are the header.
    durable=Durable(PlaybookStoreState, converter=_stored_form(), parts=("playbooks",)),
)


@playbook_store.tool(
    title="Create a playbook",
    destructive=False,
    idempotent=False,
    open_world=False,
    structured=_PlaybookData,
)
def create_playbook(
    state: PlaybookStoreState, context: ToolContext, name: Annotated[str, "The playbook's name."]
) -> CallResult:
    """Create a playbook owned by the calling assistant; returns it with its id."""
    if not name.strip():
        msg = "Error: name must not be empty"
        raise ToolError(msg)
    playbook = Playbook(f"pb_{len(state.playbooks) + 1}", name, context.assistant_id)
    state.playbooks[playbook.id] = playbook
    return CallResult.both(f"Created playbook {playbook.id}: {name}", playbook.to_data())


# Replaces the assistant's selection, a pointer: no playbook is changed or lost.
@playbook_store.tool(
    title="Select a playbook",
    destructive=False,
    idempotent=True,
    open_world=False,
    structured=_SelectedData,
)
def select_playbook(
    state: PlaybookStoreState, context: ToolContext, id: Annotated[str, "The playbook's id."]
) -> CallResult:
    """Select one of the calling assistant's playbooks."""
    playbook = state.playbooks.get(id)
    if playbook is None:
        msg = f"Error: playbook {id!r} not found"
        raise ToolError(msg)
    caller = context.assistant_id
    if caller is not None and playbook.owner != caller:
        msg = f"Error: Permission denied: playbook {id!r} does not belong to assistant {caller!r}"
        raise ToolError(msg)
    state.selected[caller] = id
    return CallResult.both(f"Selected playbook {id}: {playbook.name}", {"selected": id})


@playbook_store.tool(
    read_only=True, title="List playbooks", open_world=False, structured=_PlaybooksData
)
def list_playbooks(state: PlaybookStoreState, context: ToolContext) -> CallResult:
    """List the calling assistant's playbooks (all of them when no assistant is named)."""
    caller = context.assistant_id
    mine = [p.to_data() for p in state.playbooks.values() if caller is None or p.owner == caller]
    lines = [f"- {p['id']}: {p['name']}" for p in mine] or ["No playbooks."]
    return CallResult.both("\n".join(lines), {"playbooks": mine, "count": len(mine)})


@playbook_store.resource("playbooks://mine", title="My playbooks")
def my_playbooks(state: PlaybookStoreState, context: ToolContext) -> dict[str, Any]:
    """The calling assistant's playbooks, and the one it selected (JSON)."""
    caller = context.assistant_id
    mine = [p.to_data() for p in state.playbooks.values() if caller is None or p.owner == caller]
    return {"playbooks": mine, "selected": state.selected.get(caller)}
