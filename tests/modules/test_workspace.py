"""The workspace module, driven through the runtime with real (short) subprocesses.

Commands run the test's own interpreter, by name, found first on the search
path the tests give the module, so they do not depend on the host's shell or
coreutils. Real processes need real time, so no test here uses the autojump
clock. tests/modules/test_workspace_hardening.py covers what a hostile tenant tries.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import stat
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from actors import RuntimeClosedError, RuntimeConfig, open_runtime
from actors.modules import workspace

from .._calls import ModuleCalls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from actors import Runtime

PYTHON = Path(sys.executable).name
SEARCH_PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
"""The test interpreter's directory first, so that PYTHON is the test's interpreter."""


def python(code: str) -> str:
    """A command line running `code` with the test's interpreter."""
    return shlex.join([PYTHON, "-c", code])


PRINT_PID_AND_SLEEP = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
IGNORE_SIGTERM_AND_SLEEP = (
    "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + PRINT_PID_AND_SLEEP
)
# These report their pid in a file of the session's directory, so that a test
# learns it without calling the session (a rename makes the file appear whole).
WRITE_PID = (
    "import os, time; open('pid.tmp', 'w').write(str(os.getpid())); os.replace('pid.tmp', 'pid')"
)
WRITE_PID_AND_SLEEP = WRITE_PID + "; time.sleep(60)"
WRITE_PID_AND_WAIT_FOR_GO = (
    WRITE_PID + "\nwhile not os.path.exists('go'):\n    time.sleep(0.01)\nprint('done')"
)


@asynccontextmanager
async def running(
    root: Path, config: RuntimeConfig | None = None, **options: Any
) -> AsyncIterator[Runtime]:
    """A runtime serving a workspace under `root` that allows the test interpreter."""
    options.setdefault("allow", {PYTHON})
    options.setdefault("path", SEARCH_PATH)
    async with open_runtime([workspace(root=root, **options)], config) as runtime:
        yield runtime


_calls = ModuleCalls("workspace")
call, data, error = _calls.call, _calls.data, _calls.error


async def start(runtime: Runtime, session: str, command: str, **arguments: Any) -> str:
    """Start `command` in `session` and return its process id."""
    started = await data(runtime, "execute_command", session, command=command, **arguments)
    assert started["status"] == "running"
    process_id: str = started["processId"]
    return process_id


async def finished(runtime: Runtime, session: str, process_id: str) -> dict[str, Any]:
    """Poll until the process is no longer running; its last poll."""
    with trio.fail_after(60):
        while True:
            polled = await data(runtime, "poll_process", session, processId=process_id)
            if polled["status"] != "running":
                return polled
            await trio.sleep(0.02)


async def started_pid(runtime: Runtime, session: str, process_id: str) -> int:
    """The OS pid a PRINT_PID_AND_SLEEP process printed, once it has printed it."""
    with trio.fail_after(60):
        while True:
            polled = await data(runtime, "poll_process", session, processId=process_id)
            if polled["stdout"].endswith("\n"):
                return int(polled["stdout"])
            await trio.sleep(0.02)


async def wait_until(predicate: Callable[[], bool]) -> None:
    """Poll `predicate` until it holds, for a minute at most."""
    with trio.fail_after(60):
        while not predicate():  # noqa: ASYNC110 -- OS and runtime state that no trio.Event reports
            await trio.sleep(0.02)


async def written_pid(root: Path) -> int:
    """The pid a WRITE_PID_* process wrote in the directory of the one session under `root`."""
    await wait_until(lambda: any((d / "pid").exists() for d in session_directories(root)))
    (directory,) = session_directories(root)
    return int((directory / "pid").read_text())


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The messages logged at ERROR or above."""
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


def reaped(pid: int) -> bool:
    """Whether `pid` is gone entirely: neither running nor a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def in_proc(pid: int) -> bool:
    """Whether /proc lists `pid`, as it does a zombie."""
    return Path(f"/proc/{pid}").exists()


def entries(directory: Path) -> list[Path]:
    """What `directory` holds, sorted."""
    return sorted(directory.iterdir())


def private_roots(parent: Path) -> list[Path]:
    """The root directories workspaces made under `parent`."""
    return sorted(parent.glob("mcp-actors-workspace-*"))


def session_directories(parent: Path) -> list[Path]:
    """The session directories of the workspaces whose roots are under `parent`."""
    return [directory for root in private_roots(parent) for directory in listed(root)]


def listed(root: Path) -> list[Path]:
    """The entries of a workspace root, which is unlistable (mode 0o300) by design."""
    mode = stat.S_IMODE(root.stat().st_mode)
    root.chmod(0o700)  # the test lends itself the read permission the module withholds
    try:
        return sorted(root.iterdir())
    finally:
        root.chmod(mode)


class TestOutput:
    async def test_stdout_stderr_and_exit_code_are_captured(self, tmp_path: Path) -> None:
        """A finished process reports its exit code and both streams."""
        code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
        async with running(tmp_path) as runtime:
            process_id = await start(runtime, "s1", python(code))
            polled = await finished(runtime, "s1", process_id)
        assert polled == {
            "processId": process_id,
            "status": "exited",
            "exitCode": 3,
            "stdout": "out\n",
            "stderr": "err\n",
            "truncated": False,
        }

    async def test_output_is_capped_and_flagged(self, tmp_path: Path) -> None:
        """Beyond output_cap bytes the output is cut and truncated is set."""
        async with running(tmp_path, output_cap=100) as runtime:
            process_id = await start(runtime, "s1", python("print('x' * 1000)"))
            polled = await finished(runtime, "s1", process_id)
            text = (await call(runtime, "poll_process", "s1", processId=process_id)).first_text
        assert polled["stdout"] == "x" * 100
        assert polled["truncated"] is True
        assert text.endswith("(output truncated)")

    async def test_output_of_a_running_process_can_be_read(self, tmp_path: Path) -> None:
        """Polling while the process runs shows what it has written so far."""
        async with running(tmp_path) as runtime:
            process_id = await start(runtime, "s1", python(PRINT_PID_AND_SLEEP))
            pid = await started_pid(runtime, "s1", process_id)
            polled = await data(runtime, "poll_process", "s1", processId=process_id)
        assert polled["status"] == "running"
        assert polled["exitCode"] is None
        assert polled["stdout"] == f"{pid}\n"


class TestIsolation:
    async def test_another_sessions_process_is_not_found(self, tmp_path: Path) -> None:
        """Session 2 polling session 1's process gets "not found", with no hint."""
        async with running(tmp_path) as runtime:
            process_id = await start(runtime, "sess_1", python("print('Session 1')"))
            await start(runtime, "sess_2", python("print('Session 2')"))
            crossed = await error(runtime, "poll_process", "sess_2", processId=process_id)
            unknown = await error(runtime, "poll_process", "sess_2", processId="proc_00000000")
            own = await finished(runtime, "sess_1", process_id)
        assert crossed == f"Error: process {process_id!r} not found"
        assert unknown == "Error: process 'proc_00000000' not found"
        assert own["stdout"] == "Session 1\n"

    async def test_sessions_work_in_separate_directories(self, tmp_path: Path) -> None:
        """A file one session writes is not in the other session's directory."""
        write = "open('mine.txt', 'w').write('s1')"
        exists = "import os; print(os.path.exists('mine.txt'))"
        async with running(tmp_path) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", python(write)))
            in_s1 = await finished(runtime, "s1", await start(runtime, "s1", python(exists)))
            in_s2 = await finished(runtime, "s2", await start(runtime, "s2", python(exists)))
        assert in_s1["stdout"] == "True\n"
        assert in_s2["stdout"] == "False\n"

    @pytest.mark.parametrize("session", ["../../escape", "a/b", "..", ".", "/etc"])
    async def test_directories_stay_directly_under_root(self, tmp_path: Path, session: str) -> None:
        """Whatever the session id holds, its directory is one plain child of the module's root."""
        parent = tmp_path / "parent"
        async with running(parent) as runtime:
            cwd = await finished(
                runtime,
                session,
                await start(runtime, session, python("import os; print(os.getcwd())")),
            )
            directory = Path(cwd["stdout"].strip())
            (root,) = private_roots(parent)
            assert directory.parent == root
            assert listed(root) == [directory]
            assert entries(tmp_path) == [parent]


class TestRefusals:
    async def test_a_program_outside_the_allowlist_is_refused(self, tmp_path: Path) -> None:
        """The error names the program and the allowed ones."""
        async with running(tmp_path, allow={"true", PYTHON}) as runtime:
            message = await error(runtime, "execute_command", "s1", command="sh -c 'echo hi'")
        assert message == f"Error: program 'sh' is not allowed; allowed programs: {PYTHON}, true"

    async def test_an_empty_allowlist_allows_nothing(self, tmp_path: Path) -> None:
        """allow=() refuses every program."""
        async with running(tmp_path, allow=()) as runtime:
            message = await error(runtime, "execute_command", "s1", command=python("1"))
        assert message == f"Error: program {PYTHON!r} is not allowed; allowed programs: (none)"

    @pytest.mark.parametrize("cwd", ["..", "../..", "/", "sub/../../.."])
    async def test_a_cwd_outside_the_session_directory_is_refused(
        self, tmp_path: Path, cwd: str
    ) -> None:
        """cwd is relative to the session's directory and may not leave it."""
        async with running(tmp_path) as runtime:
            message = await error(runtime, "execute_command", "s1", command=python("1"), cwd=cwd)
        assert message == (
            f"Error: cwd {cwd!r} is outside the session's working directory; "
            "give a path relative to it"
        )

    async def test_a_symlink_out_of_the_session_directory_is_refused(self, tmp_path: Path) -> None:
        """cwd is checked after resolving symlinks."""
        root = tmp_path / "root"
        async with running(root) as runtime:
            link = "os.symlink(os.path.dirname(os.getcwd()), 'out')"
            await finished(runtime, "s1", await start(runtime, "s1", python(f"import os; {link}")))
            message = await error(runtime, "execute_command", "s1", command=python("1"), cwd="out")
        assert message.startswith("Error: cwd 'out' is outside the session's working directory")

    async def test_a_subdirectory_is_a_valid_cwd(self, tmp_path: Path) -> None:
        """A cwd inside the session's directory is where the program runs."""
        async with running(tmp_path) as runtime:
            await finished(
                runtime, "s1", await start(runtime, "s1", python("import os; os.mkdir('sub')"))
            )
            where = python("import os; print(os.path.basename(os.getcwd()))")
            polled = await finished(runtime, "s1", await start(runtime, "s1", where, cwd="sub"))
            missing = await error(runtime, "execute_command", "s1", command=where, cwd="nope")
        assert polled["stdout"] == "sub\n"
        assert missing == "Error: cwd 'nope' is not a directory in the session's working directory"

    @pytest.mark.parametrize(
        ("command", "message"),
        [
            ("", "Error: command must not be empty"),
            ("   ", "Error: command must not be empty"),
            (
                "echo 'unclosed",
                'Error: cannot parse command "echo \'unclosed": No closing quotation',
            ),
            (
                "no-such-program-xyz",
                "Error: program 'no-such-program-xyz' not found on the server's PATH",
            ),
        ],
    )
    async def test_bad_commands_say_what_is_wrong(
        self, tmp_path: Path, command: str, message: str
    ) -> None:
        """Unparsable, empty or missing programs are tool errors (here with no allowlist)."""
        async with running(tmp_path, allow=None) as runtime:
            assert await error(runtime, "execute_command", "s1", command=command) == message

    @pytest.mark.parametrize("seconds", [0.0, -1.0, float("inf")])
    async def test_a_bad_timeout_is_refused(self, tmp_path: Path, seconds: float) -> None:
        """timeout must be a positive, finite number of seconds."""
        async with running(tmp_path) as runtime:
            message = await error(
                runtime, "execute_command", "s1", command=python("1"), timeout=seconds
            )
        assert message == f"Error: timeout must be a positive number of seconds, got {seconds}"

    async def test_the_running_limit_is_enforced(self, tmp_path: Path) -> None:
        """A session may run at most 16 processes at once (the default); the 17th is refused."""
        async with running(tmp_path) as runtime:
            for _ in range(16):
                await start(runtime, "s1", python("import time; time.sleep(60)"))
            message = await error(runtime, "execute_command", "s1", command=python("1"))
            other = await start(runtime, "s2", python("1"))  # the limit is per session
        assert message.startswith("Error: this session already runs 16 processes (the limit);")
        assert other.startswith("proc_")


class TestLifetime:
    async def test_a_timeout_kills_and_reaps_without_another_call(self, tmp_path: Path) -> None:
        """Past its timeout the process is killed and reaped though the session is never called."""
        async with running(tmp_path) as runtime:
            process_id = await start(runtime, "s1", python(WRITE_PID_AND_SLEEP), timeout=0.5)
            pid = await written_pid(tmp_path)
            await wait_until(lambda: reaped(pid))
            polled = await data(runtime, "poll_process", "s1", processId=process_id)
        assert polled["status"] == "timed_out"
        assert polled["exitCode"] == -signal.SIGKILL

    async def test_a_finished_process_is_reaped_without_a_poll(self, tmp_path: Path) -> None:
        """No zombie waits for the session's next call: the exit is reaped when it happens."""
        async with running(tmp_path) as runtime:
            process_id = await start(runtime, "s1", python(WRITE_PID_AND_WAIT_FOR_GO))
            pid = await written_pid(tmp_path)
            assert not reaped(pid)
            (directory,) = session_directories(tmp_path)
            (directory / "go").touch()
            await wait_until(lambda: reaped(pid))
            assert not in_proc(pid)
            polled = await data(runtime, "poll_process", "s1", processId=process_id)
        assert (polled["status"], polled["exitCode"], polled["stdout"]) == ("exited", 0, "done\n")

    async def test_ttl_expiry_terminates_and_reaps(self, tmp_path: Path) -> None:
        """When the session's actor expires its processes are gone and its directory removed."""
        async with running(tmp_path, RuntimeConfig(ttl=0.5)) as runtime:
            process_id = await start(runtime, "s1", python(PRINT_PID_AND_SLEEP))
            pid = await started_pid(runtime, "s1", process_id)
            assert len(session_directories(tmp_path)) == 1
            await wait_until(lambda: runtime.statistics().live_actors == 0)
            assert runtime.statistics().expired == 1
            assert reaped(pid)
            assert session_directories(tmp_path) == []

    async def test_shutdown_terminates_and_reaps(self, tmp_path: Path) -> None:
        """Leaving open_runtime stops every session's processes; none is left running."""
        async with running(tmp_path) as runtime:
            first = await start(runtime, "s1", python(PRINT_PID_AND_SLEEP))
            second = await start(runtime, "s2", python(PRINT_PID_AND_SLEEP))
            pids = [
                await started_pid(runtime, "s1", first),
                await started_pid(runtime, "s2", second),
            ]
        assert all(reaped(pid) for pid in pids)
        assert session_directories(tmp_path) == []

    async def test_a_process_ignoring_sigterm_is_killed_after_the_grace(
        self, tmp_path: Path
    ) -> None:
        """SIGTERM first; a process that ignores it gets SIGKILL two seconds later."""
        async with running(tmp_path) as runtime:
            pid = await started_pid(
                runtime, "s1", await start(runtime, "s1", python(IGNORE_SIGTERM_AND_SLEEP))
            )
            begun = trio.current_time()
        assert reaped(pid)
        assert trio.current_time() - begun >= 2.0

    async def test_a_short_stop_timeout_still_kills_and_reaps(self, tmp_path: Path) -> None:
        """If the runtime cancels on_stop mid-grace, the survivors are still killed and reaped."""
        async with running(tmp_path, RuntimeConfig(stop_timeout=0.2)) as runtime:
            pid = await started_pid(
                runtime, "s1", await start(runtime, "s1", python(IGNORE_SIGTERM_AND_SLEEP))
            )
        assert reaped(pid)
        assert session_directories(tmp_path) == []

    async def test_the_programs_children_are_stopped_too(self, tmp_path: Path) -> None:
        """Signals go to the program's process group, so a child it spawned stops with it."""
        spawn = (
            "import subprocess, sys, time; "
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print(child.pid, flush=True); time.sleep(60)"
        )
        async with running(tmp_path) as runtime:
            child = await started_pid(runtime, "s1", await start(runtime, "s1", python(spawn)))
        # The orphaned child is reparented; it is dead once it is gone or a zombie.
        await wait_until(lambda: reaped(child) or _is_zombie(child))

    async def test_shutdown_cancelling_the_watchers_mid_stop_still_reaps(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A shutdown grace shorter than on_stop's: its watchers die mid-stop, on_stop reaps."""
        async with running(tmp_path, RuntimeConfig(shutdown_grace=0.1)) as runtime:
            pid = await started_pid(
                runtime, "s1", await start(runtime, "s1", python(IGNORE_SIGTERM_AND_SLEEP))
            )
        assert reaped(pid)
        assert session_directories(tmp_path) == []
        assert runtime.statistics().crashed == 0
        assert errors_logged(caplog) == []

    async def test_a_call_cut_off_at_shutdown_still_leaves_no_process(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """When shutdown cancels a busy actor, on_stop runs after its watchers and still reaps."""
        module = workspace(root=tmp_path, allow={PYTHON})
        module.tool(linger)

        async def linger_until_shutdown(runtime: Runtime) -> None:
            with pytest.raises(RuntimeClosedError):
                await call(runtime, "linger", "s1", seconds=60.0)

        async with trio.open_nursery() as nursery:
            async with open_runtime([module], RuntimeConfig(shutdown_grace=0.1)) as runtime:
                pid = await started_pid(
                    runtime, "s1", await start(runtime, "s1", python(PRINT_PID_AND_SLEEP))
                )
                nursery.start_soon(linger_until_shutdown, runtime)
                await wait_until(lambda: runtime.actors()[0].pending == 1)
        assert reaped(pid)
        assert session_directories(tmp_path) == []
        assert runtime.statistics().crashed == 0
        assert errors_logged(caplog) == []


async def linger(state: object, seconds: float) -> str:
    """Keep the session's actor busy for `seconds` (a test-only tool)."""
    await trio.sleep(seconds)
    return "done"


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


class TestHealing:
    async def test_a_removed_directory_is_recreated_before_the_next_call(
        self, tmp_path: Path
    ) -> None:
        """Delete the session's directory and the next call still works."""
        async with running(tmp_path) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", python("1")))
            (directory,) = session_directories(tmp_path)
            shutil.rmtree(directory)
            polled = await finished(
                runtime, "s1", await start(runtime, "s1", python("print('ok')"))
            )
            assert directory.is_dir()
        assert polled["stdout"] == "ok\n"


class TestFactory:
    def test_allow_must_not_be_a_string(self) -> None:
        """A bare string is refused rather than read as a set of one-letter programs."""
        with pytest.raises(
            TypeError, match=r"^allow must be a collection of program names, not the string 'git'$"
        ):
            workspace(allow="git")

    def test_allow_takes_names_not_paths(self, tmp_path: Path) -> None:
        """Entries are names looked up on the search path; a path is refused."""
        with pytest.raises(ValueError, match=r"^allow lists program names .* got '/usr/bin/git'$"):
            workspace(root=tmp_path, allow=["/usr/bin/git"])

    @pytest.mark.parametrize(
        "limit",
        ["output_cap", "file_cap", "command_cap", "max_processes", "max_processes_total"],
    )
    def test_limits_must_be_positive(self, tmp_path: Path, limit: str) -> None:
        """A zero limit would refuse everything, or return no output at all."""
        options: dict[str, Any] = {limit: 0}
        with pytest.raises(ValueError, match=rf"^{limit} must be a positive number, got 0$"):
            workspace(root=tmp_path, **options)

    def test_context_fields_stay_out_of_the_schema(self, tmp_path: Path) -> None:
        """The tools' schemas list only their own arguments."""
        module = workspace(root=tmp_path)
        schemas = {name: tool.signature.input_schema for name, tool in module.tools.items()}
        assert set(schemas["execute_command"]["properties"]) == {"command", "cwd", "timeout"}
        assert set(schemas["poll_process"]["properties"]) == {"processId"}
