"""The runtime for synchronous code: trio in a thread of its own, behind `open_blocking_runtime`.

Calls come from the test's thread and from worker threads; held handlers are
released by other calls, so nothing depends on how long anything takes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import outcome
import pytest
import trio

from actors import (
    ArgumentsError,
    BlockingRuntime,
    CallTimeoutError,
    RuntimeClosedError,
    RuntimeConfig,
    ToolModule,
    UnknownToolError,
    open_blocking_runtime,
)
from actors._blocking import raise_run_error
from actors.modules import planning
from actors.store import StoreError
from protocol import ActorKey, ContextError, ToolContext

from .test_asyncio_host import (
    CONTROL,
    PLANNING_CALLS,
    Gate,
    Seen,
    log_module,
    session,
    trio_results,
)

if TYPE_CHECKING:
    from pathlib import Path


def items(runtime: BlockingRuntime, name: str) -> list[str]:
    result = runtime.call_tool("log__read", session(name))
    assert result.structured_content is not None, result.first_text
    return list(result.structured_content["items"])


def reentrant_module(handles: list[BlockingRuntime]) -> ToolModule[None]:
    """Handlers that call the blocking handle from inside the runtime, as they must not."""
    module: ToolModule[None] = ToolModule("again", lambda _context: None)

    @module.tool
    def inline(state: None) -> str:
        """Call the runtime again from a sync handler."""
        return handles[0].call_tool("planning__list_goals", session("s")).first_text

    @module.tool
    async def awaited(state: None) -> str:
        """Read the statistics through the handle from an async handler."""
        return str(handles[0].statistics())

    return module


class TestCalls:
    def test_results_equal_the_trio_runtimes(self) -> None:
        """The same calls give equal results through the blocking handle and through trio."""
        with open_blocking_runtime([planning]) as runtime:
            results = [runtime.call_tool(name, arguments) for name, arguments in PLANNING_CALLS]
        assert results == trio.run(trio_results, PLANNING_CALLS)

    def test_threads_over_distinct_sessions_see_only_their_own_goals(self) -> None:
        """Invariant 2 with calls from eight threads at once, forty sessions."""

        def one(runtime: BlockingRuntime, i: int) -> str:
            for k in range(3):
                runtime.call_tool("planning__create_goal", session(f"s{i}", goal=f"{i}-{k}"))
            return runtime.call_tool("planning__list_goals", session(f"s{i}")).first_text

        with open_blocking_runtime([planning]) as runtime, ThreadPoolExecutor(8) as pool:
            texts = list(pool.map(lambda i: one(runtime, i), range(40)))
            assert runtime.statistics().live_actors == 40
        for i, text in enumerate(texts):
            assert text == f"Goals (3):\n- g1: {i}-0\n- g2: {i}-1\n- g3: {i}-2"

    def test_introspection_and_end_session(self) -> None:
        """statistics, actors, config, registry and end_session are the runtime's."""
        config = RuntimeConfig(mailbox_size=8)
        with open_blocking_runtime([planning], config) as runtime:
            runtime.call({"name": "planning__create_goal", "arguments": session("s", goal="x")})
            assert [info.key for info in runtime.actors()] == [
                ActorKey("planning", ToolContext("s"))
            ]
            assert runtime.statistics().calls == 1
            assert runtime.config is config
            assert runtime.registry.resolve("planning__list_goals").full_name == (
                "planning__list_goals"
            )
            assert runtime.end_session("s") == 0
            assert runtime.statistics().live_actors == 0
            listed = runtime.call_tool("planning__list_goals", meta={"sessionId": "s"})
        assert listed.first_text == "No goals yet."


class TestErrors:
    def test_the_runtimes_exceptions_reach_the_calling_thread(self) -> None:
        """UnknownToolError, ArgumentsError, ContextError, CallTimeoutError, as themselves."""
        config = RuntimeConfig(call_timeout=0.05)
        with open_blocking_runtime([log_module(Gate(), [])], config) as runtime:
            with pytest.raises(UnknownToolError, match=r"^unknown tool 'log__nope'"):
                runtime.call_tool("log__nope", session("s"))
            with pytest.raises(ArgumentsError, match=r"value"):
                runtime.call_tool("log__append", session("s", value=3))
            with pytest.raises(ContextError, match=r"^unknown context field '__sessionid'"):
                runtime.call_tool("log__read", {"__sessionid": "s"})
            with pytest.raises(CallTimeoutError, match=r"^tool 'log__hang' for .* overran"):
                runtime.call_tool("log__hang", session("s"))
            refused = runtime.call_tool("log__refuse", session("s"))
        assert (refused.is_error, refused.first_text) == (True, "Permission denied: not yours")

    def test_a_call_from_the_runtimes_own_thread_is_refused_clearly(self) -> None:
        """A handler that calls the blocking handle gets an error instead of a deadlock."""
        handles: list[BlockingRuntime] = []
        with open_blocking_runtime([planning, reentrant_module(handles)]) as runtime:
            handles.append(runtime)
            inline = runtime.call_tool("again__inline", session("s"))
            awaited = runtime.call_tool("again__awaited", session("s"))
            still = runtime.call_tool("planning__list_goals", session("s"))
        for result, tool in ((inline, "again__inline"), (awaited, "again__awaited")):
            assert result.is_error
            assert result.first_text == (
                f"tool {tool!r} failed: RuntimeError: BlockingRuntime was called from its own "
                "trio thread (from a handler?), where it would wait for itself; inside the "
                "runtime, await the trio Runtime instead"
            )
        assert still.first_text == "No goals yet."


class TestShutdown:
    def test_calls_in_flight_at_exit_finish_and_on_stop_runs_before_it_ends(self) -> None:
        """A call from another thread, running at exit, finishes; on_stop runs before exit."""
        events: list[str] = []
        config = RuntimeConfig(shutdown_grace=60)
        with ThreadPoolExecutor(1) as pool:
            with open_blocking_runtime([log_module(Gate(), events)], config) as runtime:
                napping = pool.submit(runtime.call_tool, "log__nap", session("s", seconds=0.01))
                runtime.call_tool("log__wait_entered", CONTROL)
            events.append("left the block")
            assert napping.result().structured_content == {"items": ["napped"]}
        assert sorted(events[:2]) == ["on_stop control []", "on_stop s ['napped']"]
        assert events[2:] == ["left the block"]

    def test_calls_cut_off_by_shutdown_get_runtime_closed_error(self) -> None:
        """Past shutdown_grace a running call is cancelled; its thread gets RuntimeClosedError."""
        config = RuntimeConfig(shutdown_grace=0)
        with ThreadPoolExecutor(1) as pool:
            with open_blocking_runtime([log_module(Gate(), [])], config) as runtime:
                held = pool.submit(runtime.call_tool, "log__hold", session("s", value="x"))
                runtime.call_tool("log__wait_entered", CONTROL)
            with pytest.raises(RuntimeClosedError, match=r"^the runtime shut down before this"):
                held.result()

    def test_calls_after_the_block_raise_runtime_closed_error(self) -> None:
        """A handle kept past its block refuses every call, introspection included."""
        with open_blocking_runtime([planning]) as runtime:
            pass
        message = r"^the runtime is closed: its open_blocking_runtime block has ended"
        with pytest.raises(RuntimeClosedError, match=message):
            runtime.call_tool("planning__list_goals", session("s"))
        with pytest.raises(RuntimeClosedError, match=message):
            runtime.statistics()


class TestOpening:
    def test_an_observer_hears_every_call_in_the_runtimes_thread(self) -> None:
        seen = Seen()
        with open_blocking_runtime([planning], observer=seen) as runtime:
            runtime.call_tool("planning__create_goal", {"goal": "g", **session("s")})
            runtime.call_tool("planning__list_goals", session("s"))
        assert seen.calls == [
            ("planning__create_goal", "actors runtime"),
            ("planning__list_goals", "actors runtime"),
        ]

    def test_a_bad_store_url_raises_its_own_error_in_the_callers_thread(self) -> None:
        """Startup errors are re-raised here, as themselves."""
        with (
            pytest.raises(ValueError, match=r"^unknown state store URL 'bogus://x'"),
            open_blocking_runtime([planning], state="bogus://x"),
        ):
            raise AssertionError("unreachable")

    def test_a_store_that_cannot_be_opened_raises_store_error(self, tmp_path: Path) -> None:
        """A SQLite file under a regular file cannot be created: StoreError."""
        (tmp_path / "file").write_text("not a folder")
        with (
            pytest.raises(StoreError),
            open_blocking_runtime([planning], state=f"sqlite:///{tmp_path}/file/s.db"),
        ):
            raise AssertionError("unreachable")

    def test_state_survives_from_one_handle_to_the_next(self, tmp_path: Path) -> None:
        """With a SQLite store, a goal created under one handle is there under the next."""
        url = f"sqlite:///{tmp_path}/s.db"
        with open_blocking_runtime([planning], state=url) as runtime:
            runtime.call_tool("planning__create_goal", session("s", goal="Persist"))
        with open_blocking_runtime([planning], state=url) as runtime:
            listed = runtime.call_tool("planning__list_goals", session("s"))
        assert listed.first_text == "Goals (1):\n- g1: Persist"

    def test_two_handles_at_once_are_independent(self) -> None:
        """Each handle has its own trio thread and its own state."""
        with open_blocking_runtime([planning]) as one, open_blocking_runtime([planning]) as two:
            one.call_tool("planning__create_goal", session("s", goal="only in one"))
            listed = two.call_tool("planning__list_goals", session("s"))
        assert listed.first_text == "No goals yet."

    def test_a_run_that_failed_with_a_group_of_one_raises_its_cause(self) -> None:
        """What ended a trio run comes out as its one cause, not an exception group."""
        cause = ValueError("the one cause")
        group = ExceptionGroup("from a nursery", [ExceptionGroup("nested", [cause])])
        with pytest.raises(ValueError, match=r"^the one cause$") as raised:
            raise_run_error(outcome.Error(group))
        assert raised.value is cause
        raise_run_error(outcome.Value(None))  # a run that ended well raises nothing
