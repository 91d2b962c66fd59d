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
* A key's log is read four ways, each checked against the same model: the
  ``read`` tool, the resource ``log://<module>`` (JSON), the resource
  template ``log://<module>/{separator}`` (the entries joined) and the prompt
  ``<module>__recap`` (one message per entry). The reads run on the key's
  actor in its turn like calls, so they interleave with the batch's appends
  and are checked as calls are; their context travels in ``_meta`` only.
  A target without resources (the replaced design below, the cluster's MCP
  client in ``tests/cluster/test_cluster_isolation.py``) reads through the tool.
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
and reports it as the invariant it breaks; among them a real runtime whose
resource reads and prompt gets are routed to the key its module was last
called for (a "current context" for reads alone), which only the reads'
checks can catch.

Only the default TTL is used: state that expires mid-example would diverge
from the model (TTL has tests of its own).
"""

from __future__ import annotations

import functools
import itertools
import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
import trio
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actors import HandlerError, ToolModule, open_runtime
from actors._resources import handler_data
from actors.lowlevel import prepare_prompt, prepare_read
from protocol import ActorKey, CallResult, PromptResult, ResourceResult, Scope, ToolContext

from .._stateful_harness import (
    CONTEXTS,
    VIAS,
    TrioThread,
    call_params,
    check_live_actors,
    context_meta,
    failure_of,
    machine_settings,
    run_requests,
)
from .._switch_context import open_switch_context_runtime

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
    from contextlib import AbstractAsyncContextManager

    from actors import Runtime
    from actors._prepare import Route
    from actors.lowlevel import PreparedCall

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

    @module.resource(f"log://{name}")
    def entries(state: Log) -> dict[str, list[str]]:
        """The log, as JSON."""
        return {"log": list(state.entries)}

    @module.resource(f"log://{name}/{{separator}}")
    async def joined(state: Log, separator: Separator) -> str:
        """The log's entries joined by the separator named."""
        entries = list(state.entries)
        # Async, with a checkpoint: a read interleaved with another call would show it.
        await trio.lowlevel.checkpoint()
        assert state.entries == entries, "a call ran on the state in the middle of a read"
        return SEPARATORS[separator].join(entries)

    @module.prompt
    def recap(state: Log, heading: str = "the log") -> list[str]:
        """A message naming the log, then one message per entry."""
        return [heading, *state.entries]

    return module


Separator = Literal["lines", "commas"]
SEPARATORS: Final[dict[str, str]] = {"lines": "\n", "commas": ","}


# Module name -> how many context parts (session, assistant, thread) key it.
_DEPTH: Final = {"thread_log": 3, "assistant_log": 2, "session_log": 1}
_SCOPES: Final = {
    "thread_log": Scope.SESSION_ASSISTANT_THREAD,
    "assistant_log": Scope.SESSION_ASSISTANT,
    "session_log": Scope.SESSION,
}
MODULES: Final = [_log_module(name, scope) for name, scope in _SCOPES.items()]
# By spec, for the cluster's shards: tests/cluster/test_cluster_isolation.py.
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


# How a key's log is read: the read tool, a resource, a resource template, a prompt.
READS: Final = ("tool", "resource", "template", "prompt")


@attrs.frozen
class Op:
    """One call: which module, for which context, append or read, context carried how.

    `how` says how a read reads (one of `READS`); an append is always a tool call.
    """

    module: str
    context: ToolContext
    append: bool
    via: str
    how: str = "tool"

    @property
    def key(self) -> Key:
        return expected_key(self.module, self.context)

    def params(self, value: str | None) -> dict[str, Any]:
        """The tools/call-shaped mapping for this call (an append, or a read through the tool)."""
        arguments = {} if value is None else {"value": value}
        name = f"{self.module}__{'append' if self.append else 'read'}"
        return call_params(name, arguments, self.context, self.via)

    @property
    def separator(self) -> Separator:
        """The template's separator this read asks for: the via picks one."""
        return "lines" if self.via in {"arguments", "split"} else "commas"

    def request(self, value: str | None) -> Callable[[Any], Awaitable[list[str]]]:
        """The request making this call: a function of the target, to the log it returns."""
        if self.append or self.how == "tool":
            params, call = self.params(value), self.describe(value)
            return lambda target: _call_log(target, params, call)
        meta, call = context_meta(self.context, self.via), self.describe(value)
        if self.how == "prompt":
            return lambda target: _prompt_log(target, f"{self.module}__recap", meta, call)
        uri = f"log://{self.module}"
        if self.how == "resource":
            return lambda target: _resource_log(target, uri, None, meta, call)
        separator = SEPARATORS[self.separator]
        return lambda target: _resource_log(
            target, f"{uri}/{self.separator}", separator, meta, call
        )

    def describe(self, value: str | None) -> str:
        if self.append:
            call = f"append({value!r})"
        else:
            call = {
                "tool": "read()",
                "resource": f"resources/read log://{self.module}",
                "template": f"resources/read log://{self.module}/{self.separator}",
                "prompt": f"prompts/get {self.module}__recap",
            }[self.how]
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


async def _call_log(target: Any, params: dict[str, Any], call: str) -> list[str]:
    return _log_of(await target.call(params), call)


async def _resource_log(
    target: Any, uri: str, separator: str | None, meta: dict[str, str], call: str
) -> list[str]:
    """The log a resource read shows: JSON, or the entries joined by `separator`."""
    try:
        result: ResourceResult = await target.read_resource(uri, meta=meta)
    except HandlerError as error:
        raise AssertionError(f"{call} failed: {error}") from None
    (contents,) = result.contents
    assert contents.uri == uri, f"{call} returned the contents of {contents.uri}"
    text = contents.text
    assert text is not None, f"{call} returned no text"
    if separator is None:
        assert contents.mime_type == "application/json", f"{call}: {contents.mime_type}"
        return _log_of(CallResult((), json.loads(text)), call)
    return text.split(separator) if text else []


async def _prompt_log(target: Any, name: str, meta: dict[str, str], call: str) -> list[str]:
    """The log a prompt get shows: the messages after the heading."""
    try:
        result: PromptResult = await target.get_prompt(name, meta=meta)
    except HandlerError as error:
        raise AssertionError(f"{call} failed: {error}") from None
    texts = [getattr(message.content, "text", None) for message in result.messages]
    assert texts[0] == "the log", f"{call} returned {texts}"
    assert all(isinstance(text, str) for text in texts), f"{call} returned {result}"
    return texts[1:]


# ---- the machine ----------------------------------------------------------------

module_names = st.sampled_from(list(_DEPTH))
contexts = st.sampled_from(CONTEXTS)
vias = st.sampled_from(VIAS)
# What a call does, in one draw (so that shrinking has no separate read kind to work on):
# two appends in three calls, the reads spread over the ways to read.
kinds = st.sampled_from((*["append"] * (2 * len(READS)), *READS))
# In one caller's run of calls to its key: one append in two.
lane_kinds = st.sampled_from((*["append"] * len(READS), *READS))


def _op(module: str, context: ToolContext, kind: str, via: str) -> Op:
    append = kind == "append"
    return Op(module, context, append, via, "tool" if append else kind)


ops = st.builds(_op, module_names, contexts, kinds, vias)


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
        # Resources and prompts, if the target serves them; else reads go through the tool.
        self.reads = READS if hasattr(self.loop.runtime, "read_resource") else ("tool",)

    def teardown(self) -> None:
        self.loop.close()

    def _readable(self, op: Op) -> Op:
        """`op`, reading through the tool if the target cannot read it as asked."""
        return op if op.how in self.reads else attrs.evolve(op, how="tool")

    def _run(self, lanes: list[list[tuple[Op, str | None]]]) -> list[list[Outcome]]:
        """Make each lane's calls one after the other, the lanes concurrently; their outcomes."""
        requests = [[op.request(value) for op, value in lane] for lane in lanes]
        logs = self.loop.run(run_requests, self.loop.runtime, requests)
        return [
            [
                Outcome(op, value, log, index)
                for (op, value), log in zip(lane, lane_logs, strict=True)
            ]
            for index, (lane, lane_logs) in enumerate(zip(lanes, logs, strict=True))
        ]

    def _run_batch(self, lanes: list[list[Op]]) -> None:
        planned = [
            [(self._readable(op), f"v{next(self.counter)}" if op.append else None) for op in lane]
            for lane in lanes
        ]
        for lane in planned:
            for op, value in lane:
                self.model.setdefault(op.key, [])
                if value is not None:
                    self.origin[value] = op.key
        outcomes = self._run(planned)
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
        sequential=st.lists(st.tuples(lane_kinds, vias), min_size=1, max_size=3),
        others=st.lists(ops, max_size=4),
    )
    def one_callers_sequential_calls_among_concurrent_ones(
        self, first: Op, sequential: list[tuple[str, str]], others: list[Op]
    ) -> None:
        lane = [first] + [_op(first.module, first.context, kind, via) for kind, via in sequential]
        self._run_batch([lane, *([op] for op in others)])

    @invariant()
    def every_touched_key_reads_exactly_its_own_history(self) -> None:
        # Through a different context of the pool each step, when the scope allows, and
        # each key through another of the ways to read it.
        keys = list(self.model)
        ways = itertools.islice(itertools.cycle(self.reads), self.steps, None)
        readers = [
            Op(str(key[0]), _READERS[key][self.steps % len(_READERS[key])], False, via, how)
            for key, via, how in zip(keys, itertools.cycle(VIAS), ways, strict=False)
        ]
        outcomes = [lane[0] for lane in self._run([[(op, None)] for op in readers])]
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


@asynccontextmanager
async def open_runtime_reading_the_last_called_key(
    modules: Iterable[ToolModule[Any]],
) -> AsyncIterator[Runtime]:
    """A real runtime whose reads run on the wrong actor: broken on purpose.

    Its resource reads and prompt gets are routed to the key their module was
    last called for (a "current context" for reads alone, as the replaced
    design had for everything), or to their own key if the module was never
    called; tool calls are routed as they should be.
    """
    async with open_runtime(modules) as runtime:
        last: dict[str, Route] = {}
        call, run = runtime.call, runtime.run

        def misrouted(prepared: PreparedCall) -> PreparedCall:
            return attrs.evolve(prepared, route=last.get(prepared.route[0], prepared.route))

        async def remembering_call(params: Any, *, caller: Any = None) -> CallResult:
            prepared = runtime.prepare(params, caller=caller)
            last[prepared.route[0]] = prepared.route
            return await run(prepared)

        async def read_resource(
            uri: str, *, meta: Any = None, caller: Any = None
        ) -> ResourceResult:
            prepared = misrouted(prepare_read(runtime.registry, uri, meta, caller=caller))
            return ResourceResult.from_wire(handler_data(await run(prepared)))

        async def get_prompt(
            name: str, arguments: Any = None, *, meta: Any = None, caller: Any = None
        ) -> PromptResult:
            prepared = prepare_prompt(runtime.registry, name, arguments, meta, caller=caller)
            return PromptResult.from_wire(handler_data(await run(misrouted(prepared))))

        del call
        runtime.call = remembering_call  # type: ignore[method-assign]
        runtime.read_resource = read_resource  # type: ignore[method-assign]
        runtime.get_prompt = get_prompt  # type: ignore[method-assign]
        yield runtime


class MisroutedReadsMachine(IsolationMachine):
    """The real runtime with reads routed to another key, checked by the reads alone.

    The live-actor invariant is switched off (a plain method replaces it), so
    that what catches the misrouting is the comparison of what the resource
    reads and prompt gets return with the model.
    """

    open_target = staticmethod(open_runtime_reading_the_last_called_key)

    def one_live_actor_per_touched_key(self) -> None:  # no longer an invariant
        pass


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


def test_machine_finds_resource_reads_and_prompt_gets_routed_to_another_key() -> None:
    """The reads are checked against the model like calls: misrouted ones are a leak."""
    message = _failure_of(MisroutedReadsMachine)
    assert message.startswith("invariant 2 (no leakage): ")
    assert "resources/read" in message or "prompts/get" in message, message
