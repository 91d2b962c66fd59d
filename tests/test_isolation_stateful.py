"""Invariants 2 (no leakage) and 3 (order), hammered by a Hypothesis state machine.

The approach
------------
`IsolationMachine` drives a real runtime with batches of concurrent calls to
append-only logs, and compares what the runtime returns with a model.

* Three log modules with one scope each: ``thread_log`` (session, assistant,
  thread), ``assistant_log`` (session, assistant) and ``session_log``
  (session), so the projection of a context on a scope is exercised: every
  assistant and thread of a session shares one ``session_log``.
* Contexts come from a small pool, so keys collide often. The pool holds an
  assistant named ``"none"`` and a thread named ``"default"``, the strings the
  replaced design's string keys used for absent parts (``docs/design.md``,
  "The design this replaces"). Contexts travel as ``__sessionId``-style
  arguments, snake_case arguments, ``_meta`` fields, or split between the two.
* ``append`` is a read-modify-write with checkpoints in between, so two calls
  that were allowed to interleave on one state would visibly lose an update,
  and a call that ran against the wrong state would visibly leak. Every
  appended value is unique, so its origin is known.
* Rules are synchronous; the runtime lives on a trio loop in a background
  thread (`TrioThread`, in ``tests/_stateful_harness.py``) and each rule
  submits its whole batch through `trio.from_thread.run`, where one task per
  *lane* runs the lane's calls one after the other and the lanes run
  concurrently.
* The model maps each projected key (computed here, not by `protocol`) to its
  log. Concurrent calls to one key may be accepted in any order, so a batch
  is checked for being *some* sequential execution: every log a call returns
  is the key's previous log plus a prefix of one ordering of the batch's
  appends; an append's log ends with its own value; the logs form a chain of
  prefixes; and calls a lane issued one after the other to one key took
  effect in issue order. After every step each touched key is read and must
  equal the model exactly: nothing from another key, nothing missing.

`tests/_switch_context.py` keeps the design this project replaces (one shared
current context set by ``switch_context()`` before each call; see
``docs/design.md``) and variants of it with one bug each. The same machine
runs against them, and the last tests prove that Hypothesis finds each bug
and reports it as the invariant it breaks.

Only the default TTL is used: state that expires mid-example would diverge
from the model (TTL has tests of its own).
"""

from __future__ import annotations

import functools
import itertools
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actors import ToolModule, open_runtime
from protocol import ActorKey, CallResult, Scope, ToolContext

from ._stateful_harness import (
    CONTEXTS,
    VIAS,
    TrioThread,
    call_params,
    check_live_actors,
    failure_of,
    machine_settings,
    run_lanes,
)
from ._switch_context import open_switch_context_runtime

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

# ---- the modules under test ------------------------------------------------


@attrs.define
class Log:
    """An append-only log: the state of every module of this test."""

    entries: list[str] = attrs.Factory(list)


def _log_module(name: str, scope: Scope) -> ToolModule[Log]:
    module = ToolModule(name, lambda _context: Log(), scope=scope)

    @module.tool
    async def append(state: Log, value: str) -> dict[str, list[str]]:
        """Append `value` and return the log after it."""
        entries = state.entries
        # Read, yield, write, yield, read again: if another call could run on
        # this state (or switch it) meanwhile, the log would show it.
        await trio.lowlevel.checkpoint()
        state.entries = [*entries, value]
        await trio.lowlevel.checkpoint()
        return {"log": list(state.entries)}

    @module.tool
    def read(state: Log) -> dict[str, list[str]]:
        """Return the log."""
        return {"log": list(state.entries)}

    return module


# Module name -> how many context parts (session, assistant, thread) key it.
_DEPTH: Final = {"thread_log": 3, "assistant_log": 2, "session_log": 1}
_SCOPES: Final = {
    "thread_log": Scope.SESSION_ASSISTANT_THREAD,
    "assistant_log": Scope.SESSION_ASSISTANT,
    "session_log": Scope.SESSION,
}
MODULES: Final = [_log_module(name, scope) for name, scope in _SCOPES.items()]
# By spec, for the cluster's shards: tests/test_cluster_isolation.py.
THREAD_LOG, ASSISTANT_LOG, SESSION_LOG = MODULES

# A projected key, as this test computes it: (module, session[, assistant[, thread]]).
Key = tuple[str | None, ...]


def expected_key(module: str, context: ToolContext) -> Key:
    """The key the module's state for `context` must live under, by the test's own rule."""
    parts = (context.session_id, context.assistant_id, context.thread_id)
    return (module, *parts[: _DEPTH[module]])


def _actor_key(key: Key) -> ActorKey:
    module, *parts = key
    assert module is not None
    session, assistant, thread = [*parts, None, None][:3]
    assert session is not None
    return ActorKey(module, ToolContext(session, assistant, thread))


# Every pool context that projects on each key, to read a key through many contexts.
_READERS: Final = {
    key: [context for context in CONTEXTS if expected_key(module, context) == key]
    for module in _DEPTH
    for key in {expected_key(module, context) for context in CONTEXTS}
}


def _show(key: Key) -> str:
    module, *parts = key
    return f"{module}({', '.join(map(repr, parts))})"


@attrs.frozen
class Op:
    """One call: which module, for which context, append or read, context carried how."""

    module: str
    context: ToolContext
    append: bool
    via: str

    @property
    def key(self) -> Key:
        return expected_key(self.module, self.context)

    def params(self, value: str | None) -> dict[str, Any]:
        """The tools/call-shaped mapping for this call."""
        arguments = {} if value is None else {"value": value}
        name = f"{self.module}__{'append' if self.append else 'read'}"
        return call_params(name, arguments, self.context, self.via)

    def describe(self, value: str | None) -> str:
        call = f"append({value!r})" if self.append else "read()"
        context = (self.context.session_id, self.context.assistant_id, self.context.thread_id)
        return f"{self.module}.{call} with context {context} via {self.via}"


@attrs.frozen
class Outcome:
    """A call made in a batch and the log it returned."""

    op: Op
    value: str | None
    log: list[str]
    lane: int
    """Which of the batch's concurrent callers made the call."""

    @property
    def point(self) -> int:
        """Where in the key's log the call took effect: the length of the log it saw."""
        return len(self.log)

    def describe(self) -> str:
        return f"{self.op.describe(self.value)} returned {self.log}"


# ---- checking a batch against the model --------------------------------------


def check_no_foreign_values(outcomes: list[Outcome], origin: dict[str, Key]) -> None:
    """Invariant 2, first half: a log holds only values appended under its own key."""
    for outcome in outcomes:
        for value in outcome.log:
            source = origin.get(value)
            if source != outcome.op.key:
                where = "nowhere" if source is None else _show(source)
                raise AssertionError(
                    f"invariant 2 (no leakage): {outcome.describe()}, but {value!r} was "
                    f"appended under {where}, not {_show(outcome.op.key)}"
                )


def check_batch(
    lanes: list[list[Outcome]], model: dict[Key, list[str]], origin: dict[str, Key]
) -> dict[Key, list[str]]:
    """Check that a batch ran as some sequential execution per key; return the new logs."""
    outcomes = [outcome for lane in lanes for outcome in lane]
    check_no_foreign_values(outcomes, origin)
    by_key: dict[Key, list[Outcome]] = {}
    for outcome in outcomes:
        by_key.setdefault(outcome.op.key, []).append(outcome)
    logs = {key: _check_key(key, found, model.get(key, [])) for key, found in by_key.items()}
    for lane in lanes:
        _check_lane_order(lane)
    return logs


def _check_key(key: Key, outcomes: list[Outcome], before: list[str]) -> list[str]:
    appended = {outcome.value for outcome in outcomes if outcome.value is not None}
    for outcome in outcomes:
        if outcome.log[: len(before)] != before:
            raise AssertionError(
                f"invariant 2 (no leakage): {outcome.describe()}, which does not start with "
                f"the effects of the earlier calls to {_show(key)}: {before}"
            )
        added = outcome.log[len(before) :]
        if len(set(added)) != len(added) or not set(added) <= appended:
            raise AssertionError(
                f"invariant 3 (order): {outcome.describe()}; after {before} only this "
                f"batch's appends {sorted(appended)} may follow, each once"
            )
        if outcome.value is not None and outcome.log[-1:] != [outcome.value]:
            rivals = [
                other
                for other in outcomes
                if other.value is not None and other.lane != outcome.lane
            ]
            if outcome.value not in outcome.log and not rivals:
                # No concurrent append to this key could have overwritten it.
                raise AssertionError(
                    f"invariant 2 (no leakage): {outcome.describe()}, which lacks its own "
                    f"value though no other caller appended to {_show(key)} meanwhile: the "
                    "append took effect under another key"
                )
            raise AssertionError(
                f"invariant 3 (order): {outcome.describe()}, which does not end with its own "
                "value: another call to the same key ran in the middle of it"
            )
    chain = sorted(outcomes, key=lambda outcome: outcome.point)
    for shorter, longer in itertools.pairwise(chain):
        if longer.log[: shorter.point] != shorter.log:
            raise AssertionError(
                f"invariant 3 (order): no sequential order of the calls to {_show(key)} "
                f"explains both {shorter.describe()} and {longer.describe()}"
            )
    final = chain[-1].log
    if set(final[len(before) :]) != appended:
        missing = sorted(appended - set(final))
        raise AssertionError(
            f"invariant 3 (order): the appends {missing} to {_show(key)} are in no returned "
            f"log, the longest being {final}: an update was lost"
        )
    return final


def _check_lane_order(lane: list[Outcome]) -> None:
    """Calls a lane issued one after the other to one key took effect in that order."""
    last: dict[Key, Outcome] = {}
    for outcome in lane:
        earlier = last.get(outcome.op.key)
        if earlier is not None:
            minimum = earlier.point + 1 if outcome.op.append else earlier.point
            if outcome.point < minimum:
                raise AssertionError(
                    f"invariant 3 (order): {earlier.describe()}, then the same caller's "
                    f"{outcome.describe()}: the later call took effect first"
                )
        last[outcome.op.key] = outcome


def _log_of(result: CallResult, call: str) -> list[str]:
    assert not result.is_error, f"{call} failed: {result.first_text}"
    assert result.structured_content is not None, f"{call} returned no data"
    log = result.structured_content["log"]
    assert isinstance(log, list), f"{call} returned {log!r}, not a log"
    return log


# ---- the machine ----------------------------------------------------------------

module_names = st.sampled_from(list(_DEPTH))
contexts = st.sampled_from(CONTEXTS)
vias = st.sampled_from(VIAS)
ops = st.builds(Op, module_names, contexts, st.sampled_from((True, True, False)), vias)


class IsolationMachine(RuleBasedStateMachine):
    """Concurrent calls across colliding keys, checked against per-key logs."""

    # Opens the implementation under test with the modules; overridden below.
    open_target: Callable[[list[ToolModule[Log]]], AbstractAsyncContextManager[Any]] = staticmethod(
        open_runtime
    )

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[Key, list[str]] = {}  # every touched key -> its log
        self.origin: dict[str, Key] = {}  # every appended value -> its key
        self.counter = itertools.count()
        self.steps = 0
        self.loop = TrioThread(functools.partial(type(self).open_target, MODULES))

    def teardown(self) -> None:
        self.loop.close()

    def _run_batch(self, lanes: list[list[Op]]) -> None:
        planned = [
            [(op, f"v{next(self.counter)}" if op.append else None) for op in lane] for lane in lanes
        ]
        for lane in planned:
            for op, value in lane:
                self.model.setdefault(op.key, [])
                if value is not None:
                    self.origin[value] = op.key
        params = [[op.params(value) for op, value in lane] for lane in planned]
        results = self.loop.run(run_lanes, self.loop.runtime, params)
        outcomes = [
            [
                Outcome(op, value, _log_of(result, op.describe(value)), index)
                for (op, value), result in zip(lane, lane_results, strict=True)
            ]
            for index, (lane, lane_results) in enumerate(zip(planned, results, strict=True))
        ]
        self.model.update(check_batch(outcomes, self.model, self.origin))
        self.steps += 1

    @rule(lanes=st.lists(st.lists(ops, min_size=1, max_size=2), min_size=1, max_size=4))
    def concurrent_calls_across_keys(self, lanes: list[list[Op]]) -> None:
        self._run_batch(lanes)

    @rule(
        module=module_names,
        context=contexts,
        variants=st.lists(st.tuples(st.sampled_from(CONTEXTS), vias), min_size=2, max_size=8),
    )
    def concurrent_appends_to_one_projected_key(
        self, module: str, context: ToolContext, variants: list[tuple[ToolContext, str]]
    ) -> None:
        # Contexts that differ only outside the module's scope share its key.
        depth = _DEPTH[module]
        parts = (context.session_id, context.assistant_id, context.thread_id)
        lanes = []
        for other, via in variants:
            mixed = (*parts[:depth], *(other.assistant_id, other.thread_id)[depth - 1 :])
            lanes.append([Op(module, ToolContext(*mixed), True, via)])
        self._run_batch(lanes)

    @rule(
        first=ops,
        sequential=st.lists(st.tuples(st.booleans(), vias), min_size=1, max_size=3),
        others=st.lists(ops, max_size=4),
    )
    def one_callers_sequential_calls_among_concurrent_ones(
        self, first: Op, sequential: list[tuple[bool, str]], others: list[Op]
    ) -> None:
        lane = [first] + [
            Op(first.module, first.context, append, via) for append, via in sequential
        ]
        self._run_batch([lane, *([op] for op in others)])

    @invariant()
    def every_touched_key_reads_exactly_its_own_history(self) -> None:
        # Through a different context of the pool each step, when the scope allows.
        keys = list(self.model)
        readers = [
            Op(str(key[0]), _READERS[key][self.steps % len(_READERS[key])], False, via)
            for key, via in zip(keys, itertools.cycle(VIAS), strict=False)
        ]
        results = self.loop.run(run_lanes, self.loop.runtime, [[op.params(None)] for op in readers])
        outcomes = [
            Outcome(op, None, _log_of(result, op.describe(None)), index)
            for index, (op, (result,)) in enumerate(zip(readers, results, strict=True))
        ]
        check_no_foreign_values(outcomes, self.origin)
        for outcome in outcomes:
            expected = self.model[outcome.op.key]
            if outcome.log != expected:
                raise AssertionError(
                    f"invariant 2 (no leakage): {outcome.describe()}, but exactly the "
                    f"effects of the earlier calls to {_show(outcome.op.key)} are {expected}"
                )

    @invariant()
    def one_live_actor_per_touched_key(self) -> None:
        stats = check_live_actors(self.loop, {_actor_key(key) for key in self.model}, errors=0)
        if stats is not None:  # None: the broken implementations have no actors
            assert stats.started == len(self.model), "an actor stopped with the default TTL"


_SETTINGS: Final = machine_settings(max_examples=200, stateful_step_count=10)

TestIsolationUnderConcurrentCalls = IsolationMachine.TestCase
TestIsolationUnderConcurrentCalls.settings = _SETTINGS


# ---- proof that the machine can fail ---------------------------------------------


class SwitchContextMachine(IsolationMachine):
    """The same machine against the replaced design: a shared "current context"."""

    open_target = staticmethod(open_switch_context_runtime)


class PerKeySwitchContextMachine(IsolationMachine):
    """The shared current context, with calls to one key made to wait for each other."""

    open_target = staticmethod(functools.partial(open_switch_context_runtime, serialize="keys"))


class StringKeysMachine(IsolationMachine):
    """Calls run one at a time, with states under string keys that spell absent parts."""

    open_target = staticmethod(
        functools.partial(open_switch_context_runtime, serialize="calls", string_keys=True)
    )


class UnserializedMachine(IsolationMachine):
    """Each call finds its own context's state, with nothing serializing a key's calls."""

    open_target = staticmethod(
        functools.partial(open_switch_context_runtime, context_per_call=True)
    )


def _failure_of(machine: type[RuleBasedStateMachine]) -> str:
    return failure_of(machine, _SETTINGS)


def test_machine_catches_the_shared_current_context_design() -> None:
    # It both leaks between keys and interleaves calls to one key; the
    # smallest failing example Hypothesis finds may show either.
    message = _failure_of(SwitchContextMachine)
    assert message.startswith(("invariant 2 (no leakage): ", "invariant 3 (order): "))


def test_machine_finds_the_leak_through_a_current_context_switched_by_a_concurrent_call() -> None:
    message = _failure_of(PerKeySwitchContextMachine)
    assert message.startswith("invariant 2 (no leakage): ")


def test_machine_finds_the_leak_between_absent_parts_and_the_none_and_default_literals() -> None:
    message = _failure_of(StringKeysMachine)
    assert message.startswith("invariant 2 (no leakage): ")
    assert "'none'" in message or "'default'" in message


def test_machine_finds_lost_updates_when_calls_to_one_key_interleave() -> None:
    message = _failure_of(UnserializedMachine)
    assert message.startswith("invariant 3 (order): ")
