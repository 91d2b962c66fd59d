"""Invariants 2 and 3 for the built-in modules: concurrent calls from many contexts vs. a model.

The approach
------------
`BuiltinsMachine` drives the real ``planning``, ``playbook_store`` and
``content_store`` modules through a real runtime with batches of concurrent
calls, and checks every reply against a model of each module's state, keyed
the way the module's scope keys it: a plan per (session, assistant, thread),
one playbook store and one content store per session.

* Contexts come from the pool of ``tests/_stateful_harness.py`` (assistants
  ``None``/``"a1"``/``"a2"``/``"none"``, threads ``None``/``"t1"``/
  ``"default"``), carried in any of the ways a call can carry them, so the
  sessions' shared stores are reached through many assistants and threads.
* Every goal, todo, playbook and file is created with a unique text
  (``goal-17``, ``todo-18``, ``playbook-19``, ``doc20.md`` holding
  ``token20``), so whatever a reply shows names the key it was created
  under: a value from another key is a leak, whichever call shows it.
* Calls that address an entry (``add_todo`` under a goal, ``mark_todo``,
  ``select_playbook``, ``read_content``, ``search_content``) pick it from the
  model; an "unknown" id is one the caller's key cannot hold by the end of
  the batch, and exists under another key when the pool has one, so a call
  routed to the wrong state answers instead of saying "not found".
* The rules are synchronous; the runtime runs on a trio loop in a background
  thread and each rule submits a batch of lanes: a lane's calls run one after
  the other, the lanes concurrently (`run_lanes`). Batches mix the modules
  and keys of the whole pool, gather the assistants and threads of one
  session (its playbooks and items are shared, their ownership not), aim at
  one plan that already holds entries (so todos pile up and get marked), or
  give one caller a run of sequential calls among concurrent ones.
* Within a batch several calls may reach one key, so only what holds in
  *every* serial order is checked: the creates under a key got a permutation
  of its next ids, in issue order within a lane; a listing shows the key's
  entries up to some point of the serial order, no earlier than its own
  lane's earlier creates and before its later ones; a todo shows done when
  marked before the batch or earlier in the lane, and undone when nothing
  marked it. Replies that do not depend on the order (errors, marks,
  selections, reads, the first search hit) are checked exactly.
* After every step each touched key is listed through every view (each
  assistant's ``list_playbooks`` for a session) and must equal the model
  exactly: nothing from another key, nothing missing.

The proof that the machine can fail runs it against the design this project
replaces, kept in ``tests/_switch_context.py`` (one shared current context; see
``docs/design.md``), which must be reported as a leak.

``tests/store/test_durable_stateful.py`` runs the same machine on a state store,
with actors expiring and the runtime restarting between batches
(`BuiltinsMachine.open_loop` and `BuiltinsMachine.submit` are its hooks).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

import attrs
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actors import ToolModule, open_runtime
from actors.modules import content_store, planning, playbook_store
from protocol import ActorKey, CallResult, ToolContext

from .. import _stateful_harness as harness
from .._stateful_harness import ASSISTANTS, CONTEXTS, SESSIONS, THREADS, VIAS
from .._switch_context import open_switch_context_runtime

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from contextlib import AbstractAsyncContextManager

MODULES: Final[list[ToolModule[Any]]] = [planning, playbook_store, content_store]

# ---- what each tool works on --------------------------------------------------


@attrs.frozen
class Kind:
    """A kind of entry, created with ids from one sequence per key of its module's scope."""

    module: str
    prefix: str
    """Ids are the prefix and 1, 2, ... per key."""
    depth: int
    """How many context parts (session, assistant, thread) key it."""
    ordered: bool = True
    """Whether listings show the entries in id order (todos are grouped under goals)."""


KINDS: Final = {
    "goal": Kind("planning", "g", 3),
    "todo": Kind("planning", "t", 3, ordered=False),
    "playbook": Kind("playbook_store", "pb_", 1),
    "content": Kind("content_store", "c", 1),
}
# Tool -> the kind of entry it creates, addresses or lists.
TOOLS: Final = {
    "create_goal": "goal",
    "add_todo": "todo",
    "mark_todo": "todo",
    "list_goals": "goal",
    "get_planning_state": "goal",
    "create_playbook": "playbook",
    "select_playbook": "playbook",
    "list_playbooks": "playbook",
    "add_content": "content",
    "list_contents": "content",
    "read_content": "content",
    "search_content": "content",
}
CREATES: Final = {"create_goal", "add_todo", "create_playbook", "add_content"}
LISTINGS: Final = {"list_goals", "get_planning_state", "list_playbooks", "list_contents"}

# A key of one sequence, as this test computes it: (kind, session[, assistant, thread]).
Seq = tuple[str | None, ...]


def seq_of(kind: str, context: ToolContext) -> Seq:
    parts = (context.session_id, context.assistant_id, context.thread_id)
    return (kind, *parts[: KINDS[kind].depth])


def _show_seq(seq: Seq) -> str:
    kind, *parts = seq
    return f"{kind}s of {KINDS[str(kind)].module}({', '.join(map(repr, parts))})"


def _actor_key(module: str, context: ToolContext) -> ActorKey:
    if module == "planning":
        return ActorKey(module, context)
    return ActorKey(module, ToolContext(context.session_id))


def _content(filename: str) -> str:
    """The text stored under `filename`: a token found in no other item, and shared words."""
    number = filename.removeprefix("doc").removesuffix(".md")
    return f"token{number} shared words\nabout {filename}"


def _size(filename: str) -> int:
    return len(_content(filename).encode("utf-8"))


def shown(kind: str, entry: Any, context: ToolContext) -> Any:
    """What a listing by `context` shows of a model entry; None when it must not show it.

    Entries are kept as replies show them: goals as their text, todos as
    (name, goal id), playbooks as (name, owner), items as (filename, size).
    An assistant lists only its own playbooks; a call naming none lists all.
    """
    if kind == "playbook" and context.assistant_id not in {None, entry[1]}:
        return None
    return entry


def _unique_value(entry: Any) -> str:
    """The unique text inside what a reply shows of an entry."""
    return entry if isinstance(entry, str) else str(entry[0])


# ---- calls --------------------------------------------------------------------


@attrs.frozen
class Call:
    """One generated call: a tool, the caller's context, how it travels, and what it aims at."""

    tool: str
    context: ToolContext
    via: str
    pick: int
    """Which of the model's entries the call addresses, modulo their number; -1: an unknown id."""


@attrs.frozen
class Planned:
    """A call made concrete against the model before its batch runs."""

    call: Call
    arguments: Mapping[str, Any]
    lane: int
    position: int
    """Where in its lane: calls of one lane run one after the other."""
    created: Any = None
    """For a create, the entry it creates as its reply must show it."""
    expected: Any = None
    """For a call addressing an entry, its exact reply (text, data, or first search hit)."""
    error: str | None = None
    """For a call that must fail, a fragment of the error."""

    @property
    def tool(self) -> str:
        return self.call.tool

    @property
    def context(self) -> ToolContext:
        return self.call.context

    @property
    def seq(self) -> Seq:
        return seq_of(TOOLS[self.tool], self.context)

    def params(self) -> dict[str, Any]:
        name = f"{KINDS[TOOLS[self.tool]].module}__{self.tool}"
        return harness.call_params(name, self.arguments, self.context, self.call.via)

    def describe(self) -> str:
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.arguments.items())
        context = (self.context.session_id, self.context.assistant_id, self.context.thread_id)
        return f"{self.tool}({arguments}) from {context} via {self.call.via}"


@attrs.frozen
class Outcome:
    """A planned call and its reply."""

    planned: Planned
    result: CallResult

    def describe(self) -> str:
        reply = self.result.structured_content or self.result.first_text
        flag = "an error" if self.result.is_error else "a result"
        return f"{self.planned.describe()} returned {flag}: {reply!r}"


# ---- reading replies -------------------------------------------------------------

_CREATED_GOAL: Final = re.compile(r"Created goal (g\d+): (.*)")
_ADDED_TODO: Final = re.compile(r"Added todo (t\d+): (.*?)(?: under goal (g\d+))?")
_MARKED_TODO: Final = re.compile(r"Marked todo (t\d+) done: (.*)")
_LISTED_GOAL: Final = re.compile(r"- (g\d+): (.*)")
_PLAN_GOAL: Final = re.compile(r"Goal (g\d+): (.*)")
_PLAN_TODO: Final = re.compile(r"  \[([ x])\] (t\d+): (.*)")
_EMPTY_PLAN: Final = "The plan is empty: no goals and no todos."


def _match(pattern: re.Pattern[str], text: str) -> re.Match[str]:
    found = pattern.fullmatch(text)
    assert found is not None, f"unreadable reply {text!r}: expected {pattern.pattern!r}"
    return found


def read_plan(text: str) -> tuple[list[tuple[str, str]], list[tuple[str, Any]], set[str]]:
    """The goals, todos (name, goal id) and done todo ids that get_planning_state shows."""
    goals: list[tuple[str, str]] = []
    todos: list[tuple[str, Any]] = []
    done: set[str] = set()
    if text == _EMPTY_PLAN:
        return goals, todos, done
    goal = None
    for line in text.splitlines():
        if found := _PLAN_GOAL.fullmatch(line):
            goals.append((found[1], found[2]))
            goal = found[1]
        elif line == "Todos without a goal:":
            goal = None
        else:
            found = _match(_PLAN_TODO, line)
            todos.append((found[2], (found[3], goal)))
            if found[1] == "x":
                done.add(found[2])
    return goals, todos, done


def _read_goal_list(text: str) -> list[tuple[str, str]]:
    if text == "No goals yet.":
        return []
    header, *lines = text.splitlines()
    assert header == f"Goals ({len(lines)}):", f"unreadable goal list {text!r}"
    return [(found[1], found[2]) for found in (_match(_LISTED_GOAL, line) for line in lines)]


def _playbook(data: Mapping[str, Any]) -> tuple[str, Any]:
    return data["id"], (data["name"], data["owner"])


def _item(data: Mapping[str, Any]) -> tuple[str, Any]:
    return data["id"], (data["filename"], data["size"])


def entries_shown(tool: str, result: CallResult) -> dict[str, list[tuple[str, Any]]]:
    """Per kind, the (id, entry) pairs a successful reply shows, in the order it shows them."""
    if result.is_error:
        return {}
    text = result.first_text
    data = result.structured_content or {}
    if tool == "create_goal":
        found = _match(_CREATED_GOAL, text)
        return {"goal": [(found[1], found[2])]}
    if tool == "add_todo":
        found = _match(_ADDED_TODO, text)
        return {"todo": [(found[1], (found[2], found[3]))]}
    if tool == "mark_todo":
        found = _match(_MARKED_TODO, text)
        return {"todo": [(found[1], (found[2],))]}
    if tool == "list_goals":
        return {"goal": _read_goal_list(text)}
    if tool == "get_planning_state":
        goals, todos, _ = read_plan(text)
        return {"goal": goals, "todo": todos}
    if tool == "create_playbook":
        return {"playbook": [_playbook(data)]}
    if tool == "list_playbooks":
        assert data["count"] == len(data["playbooks"]), f"miscounted: {data}"
        return {"playbook": [_playbook(playbook) for playbook in data["playbooks"]]}
    if tool in {"add_content", "read_content"}:
        return {"content": [_item(data)]}
    if tool == "list_contents":
        assert data["count"] == len(data["items"]), f"miscounted: {data}"
        return {"content": [_item(item) for item in data["items"]]}
    if tool == "search_content":
        return {"content": [(hit["id"], (hit["filename"],)) for hit in data["results"]]}
    return {}  # select_playbook shows no entry


def _id_number(entry_id: str) -> int:
    return int(re.sub(r"^\D+", "", entry_id))


# ---- the model ---------------------------------------------------------------------


@attrs.define
class Model:
    """What each key of each module must hold."""

    entries: dict[Seq, dict[str, Any]] = attrs.Factory(dict)
    """Per sequence, id -> entry, in id order."""
    done: dict[Seq, set[str]] = attrs.Factory(dict)
    """Per todo sequence, the ids marked done."""
    origin: dict[str, Seq] = attrs.Factory(dict)
    """Every unique text -> the sequence it was created under."""
    stores: dict[str | None, str] = attrs.Factory(dict)
    """Per session, the id its content store reported."""
    touched: set[ActorKey] = attrs.Factory(set)
    """The key of every call made, to list each touched key after every step."""

    def of(self, seq: Seq) -> dict[str, Any]:
        return self.entries.setdefault(seq, {})


class Planner:
    """Makes one batch of calls concrete: unique texts, ids picked from the model."""

    def __init__(self, model: Model, numbers: Iterable[int], lanes: list[list[Call]]) -> None:
        self._model = model
        self._numbers = iter(numbers)
        self._pending = Counter(
            seq_of(TOOLS[call.tool], call.context)
            for lane in lanes
            for call in lane
            if call.tool in CREATES
        )

    def unknown(self, seq: Seq) -> str:
        """An id `seq` cannot hold by the end of the batch; another key's, when one has it."""
        beyond = len(self._model.of(seq)) + self._pending[seq]
        elsewhere = max(
            (len(entries) for other, entries in self._model.entries.items() if other[0] == seq[0]),
            default=0,
        )
        return f"{KINDS[str(seq[0])].prefix}{max(beyond + 1, elsewhere)}"

    def _target(self, seq: Seq, pick: int) -> str | None:
        ids = list(self._model.of(seq))
        return ids[pick % len(ids)] if ids and pick >= 0 else None

    def plan(self, call: Call, lane: int, position: int) -> Planned:
        """`call` with its arguments and what its reply must be, as far as order allows."""
        number = next(self._numbers)
        seq = seq_of(TOOLS[call.tool], call.context)
        entries = self._model.of(seq)
        target = self._target(seq, call.pick)
        build = functools.partial(Planned, call, lane=lane, position=position)
        if call.tool == "create_goal":
            return build({"goal": f"goal-{number}"}, created=f"goal-{number}")
        if call.tool == "add_todo":
            return self._add_todo(call, number, build)
        if call.tool == "mark_todo":
            if target is None:
                return build({"todo_id": self.unknown(seq)}, error="not found")
            name = entries[target][0]
            return build({"todo_id": target}, expected=f"Marked todo {target} done: {name}")
        if call.tool == "create_playbook":
            name = f"playbook-{number}"
            return build({"name": name}, created=(name, call.context.assistant_id))
        if call.tool == "select_playbook":
            if target is None:
                return build({"id": self.unknown(seq)}, error="not found")
            caller = call.context.assistant_id
            if caller is not None and entries[target][1] != caller:
                return build({"id": target}, error="Permission denied")
            return build({"id": target}, expected={"selected": target})
        if call.tool == "add_content":
            filename = f"doc{number}.md"
            arguments = {"filename": filename, "content": _content(filename)}
            return build(arguments, created=(filename, _size(filename)))
        if call.tool == "read_content":
            if target is None:
                return build({"id": self.unknown(seq)}, error="not found")
            filename = entries[target][0]
            expected = {"id": target, "filename": filename, "content": _content(filename)}
            return build({"id": target}, expected=expected)
        if call.tool == "search_content":
            return self._search(call, seq, build)
        return build({})  # a listing

    def _add_todo(self, call: Call, number: int, build: Callable[..., Planned]) -> Planned:
        name = f"todo-{number}"
        goals = seq_of("goal", call.context)
        if call.pick < 0:
            unknown = self.unknown(goals)
            return build({"name": name, "goal_id": unknown}, error="not found")
        choices = [None, *self._model.of(goals)]
        goal = choices[call.pick % len(choices)]
        arguments = {"name": name} if goal is None else {"name": name, "goal_id": goal}
        return build(arguments, created=(name, goal))

    def _search(self, call: Call, seq: Seq, build: Callable[..., Planned]) -> Planned:
        # Any session's item: the caller's must rank first, another's must not show.
        items = [
            (other, item_id, filename)
            for other, entries in self._model.entries.items()
            if other[0] == "content"
            for item_id, (filename, _) in entries.items()
        ]
        if not items:
            return build({"query": "shared"})
        other, item_id, filename = items[call.pick % len(items)]
        query = f"{_content(filename).split()[0]} shared"
        return build({"query": query}, expected=(item_id, filename) if other == seq else None)


# ---- checking a batch ------------------------------------------------------------

Shows = list[tuple[Outcome, dict[str, list[tuple[str, Any]]]]]
Made = dict[Seq, list[tuple[Planned, str]]]


def check_batch(model: Model, outcomes: list[Outcome]) -> None:
    """Check a batch's replies for being some serial order of its calls; update the model.

    Every reply is computed from the state of its caller's key, so a reply
    that the key's model cannot explain is reported as a leak (invariant 2);
    one it explains only in an order the callers did not allow, or with an
    update lost, as a break of order (invariant 3).
    """
    shows = [(outcome, entries_shown(outcome.planned.tool, outcome.result)) for outcome in outcomes]
    _check_origins(model, shows)
    for outcome in outcomes:
        _check_reply(model, outcome)
    before = {seq: len(entries) for seq, entries in model.entries.items()}
    made = _settle_creates(model, shows)
    for outcome in outcomes:
        if outcome.planned.tool == "search_content" and not outcome.result.is_error:
            _check_search(model, outcome)
    for outcome, by_kind in shows:
        if outcome.planned.tool in LISTINGS:
            for kind, seen in by_kind.items():
                _check_listing(model, outcome, kind, seen, before, made)
    _settle_marks(model, outcomes)


def _check_origins(model: Model, shows: Shows) -> None:
    """Whatever a reply shows was created under the caller's own key."""
    for outcome, by_kind in shows:
        for kind, pairs in by_kind.items():
            own = seq_of(kind, outcome.planned.context)
            for _, entry in pairs:
                value = _unique_value(entry)
                source = model.origin.get(value)
                if source != own:
                    where = "nowhere" if source is None else f"the {_show_seq(source)}"
                    raise AssertionError(
                        f"invariant 2 (no leakage): {outcome.describe()}, but {value!r} was "
                        f"created in {where}, not the {_show_seq(own)}"
                    )


def _check_reply(model: Model, outcome: Outcome) -> None:
    """The replies that do not depend on the order of the batch, exactly."""
    planned, result = outcome.planned, outcome.result
    leak = f"invariant 2 (no leakage): {outcome.describe()}, but by the model of its key"
    if planned.error is not None:
        if not result.is_error or planned.error not in result.first_text:
            raise AssertionError(f"{leak} it fails saying {planned.error!r}")
        return
    if result.is_error:
        raise AssertionError(f"{leak} it succeeds")
    data = result.structured_content or {}
    if planned.tool == "mark_todo" and result.first_text != planned.expected:
        raise AssertionError(f"{leak} it says {planned.expected!r}")
    if planned.tool == "select_playbook" and data != planned.expected:
        raise AssertionError(f"{leak} it returns {planned.expected!r}")
    if (
        planned.tool == "read_content"
        and {name: data.get(name) for name in planned.expected} != planned.expected
    ):
        raise AssertionError(f"{leak} it returns {planned.expected!r}")
    if planned.tool == "add_content":
        _check_store_id(model, outcome, data["storeId"])


def _check_search(model: Model, outcome: Outcome) -> None:
    """Every hit is an item of the caller's session; the item holding the query's token first."""
    planned = outcome.planned
    data = outcome.result.structured_content or {}
    hits = [(hit["id"], hit["filename"]) for hit in data["results"]]
    entries = model.of(planned.seq)
    strays = [hit for hit in hits if entries.get(hit[0], (None,))[0] != hit[1]]
    if strays:
        raise AssertionError(
            f"invariant 2 (no leakage): {outcome.describe()}, but the {_show_seq(planned.seq)} "
            f"has no {strays}"
        )
    if planned.expected is not None and hits[:1] != [planned.expected]:
        raise AssertionError(
            f"invariant 2 (no leakage): {outcome.describe()}, but {planned.expected} of the "
            f"{_show_seq(planned.seq)} holds the query's unique token and must rank first"
        )


def _check_store_id(model: Model, outcome: Outcome, store: str) -> None:
    session = outcome.planned.context.session_id
    known = model.stores.setdefault(session, store)
    others = {other: theirs for other, theirs in model.stores.items() if other != session}
    if store != known or store in others.values():
        raise AssertionError(
            f"invariant 2 (no leakage): {outcome.describe()}, but session {session!r}'s "
            f"store is {known!r} and the others' are {others}"
        )


def _settle_creates(model: Model, shows: Shows) -> Made:
    """Check the ids the batch's creates got; add the entries to the model in id order."""
    made: Made = {}
    for outcome, by_kind in shows:
        planned = outcome.planned
        if planned.created is None or outcome.result.is_error:
            continue
        ((entry_id, entry),) = by_kind[TOOLS[planned.tool]]
        if entry != planned.created:
            raise AssertionError(
                f"invariant 2 (no leakage): {outcome.describe()}, but it created {planned.created}"
            )
        made.setdefault(planned.seq, []).append((planned, entry_id))
    for seq, creates in made.items():
        entries = model.of(seq)
        prefix = KINDS[str(seq[0])].prefix
        expected = [f"{prefix}{len(entries) + index}" for index in range(1, len(creates) + 1)]
        ids = [entry_id for _, entry_id in creates]
        calls = "; ".join(f"{planned.describe()} got {entry_id}" for planned, entry_id in creates)
        if sorted(ids, key=_id_number) != expected:
            lost = len(set(ids)) < len(ids) and set(ids) <= set(expected)
            raise AssertionError(
                f"invariant {'3 (order)' if lost else '2 (no leakage)'}: {calls}; but the "
                f"{_show_seq(seq)} holds {list(entries)}, so they get {expected} in some order"
            )
        for _, lane in itertools.groupby(sorted(creates, key=_lane_order), key=_lane):
            lane_ids = [entry_id for _, entry_id in lane]
            if lane_ids != sorted(lane_ids, key=_id_number):
                raise AssertionError(
                    f"invariant 3 (order): {calls}; but one caller issued them one after the "
                    "other, so their ids must grow"
                )
        for planned, entry_id in sorted(creates, key=lambda create: _id_number(create[1])):
            entries[entry_id] = planned.created
    return made


def _lane(create: tuple[Planned, str]) -> int:
    return create[0].lane


def _lane_order(create: tuple[Planned, str]) -> tuple[int, int]:
    return create[0].lane, create[0].position


def _check_listing(
    model: Model,
    outcome: Outcome,
    kind: str,
    seen: list[tuple[str, Any]],
    before: Mapping[Seq, int],
    made: Made,
) -> None:
    """A listing shows its key's entries up to some point of the batch's serial order.

    That point comes after the key's entries from earlier batches and after the
    creates its own lane issued before it, and before those issued after it.
    """
    planned = outcome.planned
    seq = seq_of(kind, planned.context)
    final = list(model.of(seq).items())
    ids = [entry_id for entry_id, _ in final]
    start = lowest = before.get(seq, 0)
    highest = len(final)
    for other, entry_id in made.get(seq, []):
        if other.lane == planned.lane:
            if other.position < planned.position:
                lowest = max(lowest, ids.index(entry_id) + 1)
            else:
                highest = min(highest, ids.index(entry_id))

    def listed(point: int) -> list[tuple[str, Any]]:
        visible = [(entry_id, shown(kind, entry, planned.context)) for entry_id, entry in final]
        return [(entry_id, entry) for entry_id, entry in visible[:point] if entry is not None]

    def matches(point: int) -> bool:
        expected = listed(point)
        if KINDS[kind].ordered:
            return seen == expected
        return len(dict(seen)) == len(seen) and dict(seen) == dict(expected)

    if any(matches(point) for point in range(lowest, highest + 1)):
        return
    if any(matches(point) for point in range(start, len(final) + 1)):
        raise AssertionError(
            f"invariant 3 (order): {outcome.describe()}, which misses an earlier create of the "
            "same caller or shows a later one"
        )
    raise AssertionError(
        f"invariant 2 (no leakage): {outcome.describe()}, but in every serial order of the "
        f"batch it lists {listed(highest)} or a prefix of it from the "
        f"{_show_seq(seq)} ({listed(start)} before the batch)"
    )


def _settle_marks(model: Model, outcomes: list[Outcome]) -> None:
    """Plans show a todo done iff marked before, or maybe when marked in this batch."""
    marks = [
        (outcome.planned, outcome.planned.arguments["todo_id"])
        for outcome in outcomes
        if outcome.planned.tool == "mark_todo" and not outcome.result.is_error
    ]
    for outcome in outcomes:
        planned = outcome.planned
        if planned.tool != "get_planning_state" or outcome.result.is_error:
            continue
        seq = seq_of("todo", planned.context)
        _, todos, done = read_plan(outcome.result.first_text)
        earlier = set(model.done.get(seq, ()))
        maybe = set(earlier)
        for mark, todo_id in marks:
            if mark.seq != seq:
                continue
            if mark.lane != planned.lane:
                maybe.add(todo_id)
            elif mark.position < planned.position:
                earlier.add(todo_id)
        listed = {todo_id for todo_id, _ in todos}
        if not done <= earlier | maybe:
            raise AssertionError(
                f"invariant 2 (no leakage): {outcome.describe()}, but no call marked "
                f"{sorted(done - earlier - maybe)} of the {_show_seq(seq)}"
            )
        undone = earlier & listed - done
        if undone:
            raise AssertionError(
                f"invariant 3 (order): {outcome.describe()}, but {sorted(undone)} of the "
                f"{_show_seq(seq)} were marked done before it"
            )
    for mark, todo_id in marks:
        model.done.setdefault(mark.seq, set()).add(todo_id)


# ---- the machine ----------------------------------------------------------------

MODULE_TOOLS: Final = {
    module.name: [tool for tool, kind in TOOLS.items() if KINDS[kind].module == module.name]
    for module in MODULES
}
tools = st.sampled_from(list(TOOLS))
contexts = st.sampled_from(CONTEXTS)
vias = st.sampled_from(VIAS)
picks = st.integers(-1, 5)
calls = st.builds(Call, tools, contexts, vias, picks)


class BuiltinsMachine(RuleBasedStateMachine):
    """Concurrent calls to the built-in modules across colliding keys, checked against a model."""

    # Opens the implementation under test with the modules; overridden below.
    open_target: Callable[[list[ToolModule[Any]]], AbstractAsyncContextManager[Any]] = staticmethod(
        open_runtime
    )

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.numbers = itertools.count()
        self.expected_errors = 0
        self.steps = 0
        self.loop = self.open_loop()

    def open_loop(self) -> harness.TrioThread:
        """The implementation under test, open with the modules on a loop of its own."""
        return harness.TrioThread(functools.partial(type(self).open_target, MODULES))

    def teardown(self) -> None:
        self.loop.close()

    def submit(self, lanes: list[list[dict[str, Any]]]) -> list[list[CallResult]]:
        """Run a batch: each lane's calls one after the other, the lanes concurrently."""
        results: list[list[CallResult]] = self.loop.run(harness.run_lanes, self.loop.runtime, lanes)
        return results

    def _run(self, planned: list[list[Planned]]) -> list[Outcome]:
        for call in itertools.chain.from_iterable(planned):
            if call.created is not None:
                self.model.origin[_unique_value(call.created)] = call.seq
            self.expected_errors += call.error is not None
            module = KINDS[TOOLS[call.tool]].module
            self.model.touched.add(_actor_key(module, call.context))
        results = self.submit([[call.params() for call in lane] for lane in planned])
        outcomes = [
            Outcome(call, result)
            for lane, lane_results in zip(planned, results, strict=True)
            for call, result in zip(lane, lane_results, strict=True)
        ]
        check_batch(self.model, outcomes)
        return outcomes

    def _run_batch(self, lanes: list[list[Call]]) -> None:
        planner = Planner(self.model, self.numbers, lanes)
        outcomes = self._run(
            [
                [planner.plan(call, index, position) for position, call in enumerate(lane)]
                for index, lane in enumerate(lanes)
            ]
        )
        self.steps += 1
        # What the examples exercised, for --hypothesis-show-statistics.
        for outcome in outcomes:
            planned = outcome.planned
            event(f"{planned.tool}: {planned.error or 'succeeds'}")
        lanes_per_seq = Counter(
            seq for seq, _ in {(outcome.planned.seq, outcome.planned.lane) for outcome in outcomes}
        )
        if any(count > 1 for count in lanes_per_seq.values()):
            event("one key reached by concurrent lanes")

    @rule(lanes=st.lists(st.lists(calls, min_size=1, max_size=3), min_size=1, max_size=4))
    def concurrent_calls_across_modules_and_keys(self, lanes: list[list[Call]]) -> None:
        self._run_batch(lanes)

    @rule(
        session=st.sampled_from(SESSIONS),
        lanes=st.lists(
            st.lists(
                st.tuples(
                    tools, st.sampled_from(ASSISTANTS), st.sampled_from(THREADS), vias, picks
                ),
                min_size=1,
                max_size=3,
            ),
            min_size=2,
            max_size=5,
        ),
    )
    def concurrent_calls_from_the_assistants_and_threads_of_one_session(
        self, session: str, lanes: list[list[tuple[str, str | None, str | None, str, int]]]
    ) -> None:
        self._run_batch(
            [
                [
                    Call(tool, ToolContext(session, assistant, thread), via, pick)
                    for tool, assistant, thread, via, pick in lane
                ]
                for lane in lanes
            ]
        )

    @rule(
        home=st.integers(0, 99),
        lanes=st.lists(
            st.lists(
                st.tuples(st.sampled_from(MODULE_TOOLS["planning"]), vias, picks),
                min_size=1,
                max_size=3,
            ),
            min_size=1,
            max_size=4,
        ),
    )
    def concurrent_calls_to_a_plan_that_holds_entries(
        self, home: int, lanes: list[list[tuple[str, str, int]]]
    ) -> None:
        # Where todos pile up and get marked: a plan with entries, chosen by index.
        plans = sorted(
            {seq[1:] for seq, entries in self.model.entries.items() if len(seq) == 4 and entries},
            key=repr,
        )
        if plans:
            session, assistant, thread = plans[home % len(plans)]
            assert session is not None
            context = ToolContext(session, assistant, thread)
        else:
            context = CONTEXTS[home % len(CONTEXTS)]
        self._run_batch(
            [[Call(tool, context, via, pick) for tool, via, pick in lane] for lane in lanes]
        )

    @rule(
        context=contexts,
        module=st.sampled_from(list(MODULE_TOOLS)),
        sequence=st.lists(st.tuples(st.integers(0, 4), vias, picks), min_size=2, max_size=4),
        others=st.lists(calls, max_size=3),
    )
    def one_callers_sequential_calls_among_concurrent_ones(
        self,
        context: ToolContext,
        module: str,
        sequence: list[tuple[int, str, int]],
        others: list[Call],
    ) -> None:
        names = MODULE_TOOLS[module]
        lane = [
            Call(names[index % len(names)], context, via, pick) for index, via, pick in sequence
        ]
        self._run_batch([lane, *([call] for call in others)])

    @invariant()
    def every_touched_key_lists_exactly_its_model(self) -> None:
        # Each step through another via, and another thread and assistant where the scope allows.
        shift = self.steps
        readers: list[tuple[str, ToolContext]] = []
        for key in sorted(self.model.touched, key=repr):
            session = key.context.session_id
            if key.module == "planning":
                readers += [("get_planning_state", key.context), ("list_goals", key.context)]
            elif key.module == "playbook_store":
                readers += [
                    ("list_playbooks", ToolContext(session, assistant, THREADS[(shift + i) % 3]))
                    for i, assistant in enumerate(ASSISTANTS)
                ]
            else:
                other = CONTEXTS[shift % len(CONTEXTS)]
                context = ToolContext(session, other.assistant_id, other.thread_id)
                readers.append(("list_contents", context))
        self._run(
            [
                [Planned(Call(tool, context, VIAS[(shift + lane) % len(VIAS)], 0), {}, lane, 0)]
                for lane, (tool, context) in enumerate(readers)
            ]
        )

    @invariant()
    def one_live_actor_per_touched_key_and_only_the_expected_errors(self) -> None:
        # Checks nothing against the broken implementation, which has no actors.
        harness.check_live_actors(self.loop, self.model.touched, errors=self.expected_errors)


# 300 examples rather than 100: a planted bug that marks the wrong todo done needs a plan
# with two todos and a later mark; 100 examples found it 3 times in 4, 300 every time (~9 s).
_SETTINGS: Final = harness.machine_settings(max_examples=300, stateful_step_count=8)

TestBuiltinModulesKeepEachKeysStateUnderConcurrentCalls = BuiltinsMachine.TestCase
TestBuiltinModulesKeepEachKeysStateUnderConcurrentCalls.settings = _SETTINGS


# ---- proof that the machine can fail ---------------------------------------------


class SwitchContextBuiltinsMachine(BuiltinsMachine):
    """The same machine against the replaced design: a shared "current context"."""

    open_target = staticmethod(open_switch_context_runtime)


def test_machine_finds_the_leak_between_keys_in_the_shared_current_context_design() -> None:
    message = harness.failure_of(SwitchContextBuiltinsMachine, _SETTINGS)
    assert message.startswith("invariant 2 (no leakage): ")
