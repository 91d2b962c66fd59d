"""The workspace module against a hostile tenant: real programs, real processes.

Each test is an attack on, or a limit of, what `actors.modules._workspace`
promises: which program runs, what environment it sees, how much work a
caller can ask for, what survives a session, how much a command may write,
how many commands may run, who can find a session's directory, and what is
left on disk. Linux only, like the module.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from actors import ActorCrashedError, RuntimeConfig, open_runtime
from actors.modules import _workspace, workspace

from .test_workspace import (
    PYTHON,
    SEARCH_PATH,
    call,
    data,
    entries,
    error,
    finished,
    listed,
    private_roots,
    python,
    reaped,
    running,
    session_directories,
    start,
    wait_until,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from actors import Runtime

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the workspace is Linux only")


def sh(script: str) -> str:
    """A command line running `script` with sh."""
    return shlex.join(["sh", "-c", script])


def alive(pid: int) -> bool:
    """Whether `pid` runs: it exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def session_of(pid: int) -> int:
    return os.getsid(pid)


async def read_pid(path: Path) -> int:
    """The pid a command wrote (whole, through a rename) to `path`."""
    await wait_until(path.exists)
    return int(_read(path))


def _read(path: Path) -> str:
    return path.read_text()


def _touch(path: Path) -> None:
    path.touch()


@pytest.fixture
def strays() -> Iterator[list[int]]:
    """Pids a test learns; whatever still runs at its end is killed, pass or fail."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


class TestWhichProgramRuns:
    async def test_a_copy_of_sh_named_like_an_allowed_program_never_runs(
        self, tmp_path: Path
    ) -> None:
        """With cp and ls allowed, `cp /bin/sh ./ls; ./ls -c id` is refused; `ls` is the real ls."""
        async with running(tmp_path, allow={"cp", "ls"}) as runtime:
            copied = await finished(runtime, "s1", await start(runtime, "s1", "cp /bin/sh ./ls"))
            by_path = await error(runtime, "execute_command", "s1", command="./ls -c id")
            by_name = await finished(runtime, "s1", await start(runtime, "s1", "ls -c id"))
        assert copied["exitCode"] == 0
        assert by_path == (
            "Error: program './ls' is a path; give a program name, which is looked up on "
            "the server's PATH (never in the session's directory)"
        )
        assert by_name["exitCode"] != 0  # ls, asked to list a file named "id"
        assert "uid=" not in by_name["stdout"]

    @pytest.mark.parametrize("program", ["/bin/sh", "../sh", "sub/ls"])
    async def test_a_path_is_refused_even_without_an_allowlist(
        self, tmp_path: Path, program: str
    ) -> None:
        """Programs are always looked up on the server's PATH; a file by path never runs."""
        async with running(tmp_path, allow=None) as runtime:
            message = await error(runtime, "execute_command", "s1", command=f"{program} -c id")
        assert message.startswith(f"Error: program {program!r} is a path; give a program name")

    async def test_a_planted_program_in_the_session_directory_does_not_run(
        self, tmp_path: Path
    ) -> None:
        """A session's executable `ls` does not shadow the real one, even with '.' on PATH."""
        plant = (
            "open('ls', 'w').write('#!/bin/sh\\necho planted\\n'); import os; os.chmod('ls', 0o755)"
        )
        path = os.pathsep.join([".", "", SEARCH_PATH])  # relative entries are dropped
        async with running(tmp_path, allow=None, path=path) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", python(plant)))
            listing = await finished(runtime, "s1", await start(runtime, "s1", "ls"))
        assert listing["exitCode"] == 0
        assert listing["stdout"] == "ls\n"  # the real ls, listing the planted file

    async def test_a_symlink_repointed_after_startup_is_refused(self, tmp_path: Path) -> None:
        """An allowed name whose file changed since the module was built does not run."""
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "tool").symlink_to("/bin/true")
        async with running(tmp_path / "root", allow={"tool"}, path=str(bin_dir)) as runtime:
            before = await finished(runtime, "s1", await start(runtime, "s1", "tool"))
            (bin_dir / "tool").unlink()
            (bin_dir / "tool").symlink_to("/bin/sh")
            message = await error(runtime, "execute_command", "s1", command="tool -c id")
        assert before["exitCode"] == 0
        assert message == (
            "Error: program 'tool' is no longer the file allowed when the server started; "
            "an operator must restart the server to allow it again"
        )

    async def test_another_name_for_an_allowed_file_is_refused(self, tmp_path: Path) -> None:
        """Names are compared too: on a multi-call binary one file is many programs."""
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "ls").symlink_to("/bin/true")
        (bin_dir / "sh").symlink_to("/bin/true")  # the same file, another program
        async with running(tmp_path / "root", allow={"ls"}, path=str(bin_dir)) as runtime:
            message = await error(runtime, "execute_command", "s1", command="sh -c id")
        assert message == "Error: program 'sh' is not allowed; allowed programs: ls"

    async def test_a_program_that_cannot_be_executed_is_an_error_of_the_call(
        self, tmp_path: Path
    ) -> None:
        """The supervisor reports why the program did not start; nothing is left counted."""
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        tool = bin_dir / "tool"
        tool.write_bytes(b"\x7fELF garbage")
        tool.chmod(0o755)
        # No allowlist: an allowed file that changed since startup would not even be tried.
        module_options: dict[str, Any] = {"allow": None, "path": str(bin_dir)}
        async with running(tmp_path / "root", max_processes=1, **module_options) as runtime:
            got = await error(runtime, "execute_command", "s1", command="tool")
            tool.write_text("#!/bin/sh\n")
            after = await _start_when_free(runtime, "s1", "tool")
        assert got == "Error: cannot start 'tool': Exec format error"
        assert after.startswith("proc_")

    @pytest.mark.parametrize("change", ["rewrite", "replace", "chmod", "remove"])
    async def test_an_allowed_file_changed_since_startup_is_refused(
        self, tmp_path: Path, change: str
    ) -> None:
        """Rewritten in place (same inode, mtime set back), replaced, chmod-ed or removed."""
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        tool = bin_dir / "tool"
        tool.write_text("#!/bin/sh\necho allowed\n")
        tool.chmod(0o755)
        module_options: dict[str, Any] = {"allow": {"tool"}, "path": str(bin_dir)}
        async with running(tmp_path / "root", **module_options) as runtime:
            before = await finished(runtime, "s1", await start(runtime, "s1", "tool"))
            if change == "rewrite":  # what `cp /bin/sh tool; touch -r backup tool` does
                times = tool.stat()
                with tool.open("r+") as file:
                    file.write("#!/bin/sh\necho swapped\n")  # as long as the original
                os.utime(tool, ns=(times.st_atime_ns, times.st_mtime_ns))
            elif change == "replace":
                tool.unlink()
                tool.write_text("#!/bin/sh\necho swapped\n")
                tool.chmod(0o755)
            elif change == "chmod":
                tool.chmod(0o4755)
            else:
                tool.unlink()
            message = await error(runtime, "execute_command", "s1", command="tool")
        assert before["stdout"] == "allowed\n"
        assert message == (
            "Error: program 'tool' is no longer the file allowed when the server started; "
            "an operator must restart the server to allow it again"
        )

    def test_an_allowed_program_missing_from_the_path_is_a_build_error(
        self, tmp_path: Path
    ) -> None:
        """An operator's typo in the allowlist is reported when the module is built."""
        with pytest.raises(
            ValueError, match=r"^allow: program 'no-such-program-xyz' not found on the search path"
        ):
            workspace(root=tmp_path, allow={"no-such-program-xyz"}, path=SEARCH_PATH)

    async def test_the_servers_environment_is_not_passed_on(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A secret in the server's environment is invisible; the command gets four variables."""
        monkeypatch.setenv("MCP_ACTORS_TEST_SECRET", "hunter2")
        async with running(tmp_path, allow={"env"}) as runtime:
            polled = await finished(runtime, "s1", await start(runtime, "s1", "env"))
            (directory,) = session_directories(tmp_path)
        variables = dict(line.split("=", 1) for line in polled["stdout"].splitlines())
        absolute = [entry for entry in SEARCH_PATH.split(os.pathsep) if os.path.isabs(entry)]
        assert "hunter2" not in polled["stdout"]
        assert variables == {
            "PATH": os.pathsep.join(absolute),
            "HOME": str(directory),
            "TMPDIR": str(directory),
            "LANG": "C.UTF-8",
        }

    async def test_a_command_holds_no_descriptor_of_the_server(self, tmp_path: Path) -> None:
        """Only stdin, stdout and stderr: not its supervisor's socket to the server."""
        code = "import os; print(sorted(os.listdir('/proc/self/fd')))"
        async with running(tmp_path) as runtime:
            polled = await finished(runtime, "s1", await start(runtime, "s1", python(code)))
        assert polled["stdout"] == "['0', '1', '2', '3']\n"  # 3: the listing's own


class TestBoundedWork:
    async def test_a_900_kb_command_is_refused_before_it_is_parsed(self, tmp_path: Path) -> None:
        """The length is checked first: no shlex pass over 900 KB of unbalanced quotes."""
        command = "nope '" + "a" * (900 * 1024)
        async with running(tmp_path) as runtime:
            message = await error(runtime, "execute_command", "s1", command=command)
        assert message == (
            f"Error: command is {len(command)} characters long; the limit is 16384: "
            "put long input in a file in the session's directory"
        )

    async def test_the_program_is_checked_before_the_rest_is_split(self, tmp_path: Path) -> None:
        """A program outside the allowlist is refused on its name, not its malformed arguments."""
        async with running(tmp_path) as runtime:
            message = await error(runtime, "execute_command", "s1", command="sh -c 'unclosed")
        assert message.startswith("Error: program 'sh' is not allowed")

    async def test_the_command_cap_is_a_parameter(self, tmp_path: Path) -> None:
        """command_cap bounds the length; a command within it runs."""
        async with running(tmp_path, command_cap=len(python("1"))) as runtime:
            ok = await finished(runtime, "s1", await start(runtime, "s1", python("1")))
            message = await error(runtime, "execute_command", "s1", command=python("12"))
        assert ok["exitCode"] == 0
        assert message.startswith("Error: command is ")

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            ({"command": "ls\0-l"}, "Error: command must not contain NUL characters"),
            ({"command": "ls", "cwd": "a" * 5000}, "Error: cwd is 5000 characters long"),
            ({"command": "ls", "cwd": "loop"}, "Error: cwd 'loop' cannot be resolved"),
        ],
        ids=["nul", "long-cwd", "symlink-loop"],
    )
    async def test_bad_input_is_a_tool_error(
        self, tmp_path: Path, arguments: dict[str, Any], message: str
    ) -> None:
        """NUL bytes, huge paths and symlink loops name the problem instead of crashing."""
        loop = "import os; os.symlink('loop2', 'loop'); os.symlink('loop', 'loop2')"
        async with running(tmp_path, allow={"ls", PYTHON}) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", python(loop)))
            got = await error(runtime, "execute_command", "s1", **arguments)
        assert got.startswith(message)


BACKGROUND_CHILD = "sleep 300 & echo $! > bg.tmp && mv bg.tmp bg; exit 0"
"""A leader that exits at once, leaving its child behind."""
SETSID_GRANDCHILD = (
    "sh -c 'setsid sh -c \"echo \\$\\$ > gc.tmp && mv gc.tmp gc; exec sleep 300\" & wait' & exit 0"
)
"""A grandchild in a session of its own, below a child of a leader that exits at once."""


async def stop_by(how: str, runtime: Runtime) -> None:
    """Make the session's actor stop: by waiting for its TTL, or (on return) by shutdown."""
    if how == "ttl":
        await wait_until(lambda: runtime.statistics().live_actors == 0)
        assert runtime.statistics().expired == 1


class TestNoOrphans:
    @pytest.mark.parametrize("how", ["ttl", "shutdown"])
    async def test_what_a_command_leaves_behind_dies_with_the_session(
        self, tmp_path: Path, how: str, strays: list[int]
    ) -> None:
        """The child of an exited leader and a setsid grandchild are gone once the actor stops."""
        ttl = 2.0 if how == "ttl" else 3600.0
        async with running(tmp_path, RuntimeConfig(ttl=ttl), allow={"sh"}) as runtime:
            first = await finished(runtime, "s1", await start(runtime, "s1", sh(BACKGROUND_CHILD)))
            second = await finished(
                runtime, "s1", await start(runtime, "s1", sh(SETSID_GRANDCHILD))
            )
            (directory,) = session_directories(tmp_path)
            child = await read_pid(directory / "bg")
            grandchild = await read_pid(directory / "gc")
            strays += [child, grandchild]
            assert alive(child)
            assert alive(grandchild)
            assert session_of(grandchild) == grandchild  # it left the command's session
            await stop_by(how, runtime)
        assert (first["status"], first["exitCode"]) == ("exited", 0)
        assert (second["status"], second["exitCode"]) == ("exited", 0)
        assert reaped(child)
        assert reaped(grandchild)

    async def test_what_left_the_group_still_gets_sigterm_first(
        self, tmp_path: Path, strays: list[int]
    ) -> None:
        """At stop a setsid grandchild gets SIGTERM, so it can clean up, before any SIGKILL."""
        marker = tmp_path / "terminated"
        code = (
            "import os, signal, sys, time\n"
            f"def done(*_): open({str(marker)!r}, 'w').close(); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, done)\n"
            "open('gc.tmp', 'w').write(str(os.getpid())); os.replace('gc.tmp', 'gc')\n"
            "time.sleep(60)\n"
        )
        async with running(tmp_path / "root", allow={"sh"}) as runtime:
            await start(runtime, "s1", sh(f"setsid {python(code)} & exit 0"))
            (directory,) = session_directories(tmp_path / "root")
            grandchild = await read_pid(directory / "gc")
            strays.append(grandchild)
            assert session_of(grandchild) == grandchild
        assert reaped(grandchild)
        assert marker.exists()

    async def test_a_timeout_also_ends_what_the_command_left_behind(
        self, tmp_path: Path, strays: list[int]
    ) -> None:
        """Past the deadline the background child dies; the leader's own status stays exited."""
        async with running(tmp_path, allow={"sh"}) as runtime:
            process_id = await start(runtime, "s1", sh(BACKGROUND_CHILD), timeout=1.0)
            (directory,) = session_directories(tmp_path)
            child = await read_pid(directory / "bg")
            strays.append(child)
            await wait_until(lambda: reaped(child))
            polled = await data(runtime, "poll_process", "s1", processId=process_id)
        assert (polled["status"], polled["exitCode"]) == ("exited", 0)

    async def test_a_server_killed_with_sigkill_leaves_no_process(
        self, tmp_path: Path, strays: list[int]
    ) -> None:
        """The supervisors see the server's end of their sockets close and kill their trees."""
        marker = tmp_path / "bg"
        command = sh(f"sleep 300 & echo $! > {marker}.tmp && mv {marker}.tmp {marker}; exit 0")
        server = (
            "import sys, trio\n"
            "from pathlib import Path\n"
            "from actors import open_runtime\n"
            "from actors.modules import workspace\n"
            "async def main():\n"
            f"    path = {SEARCH_PATH!r}\n"
            "    module = workspace(root=Path(sys.argv[1]), allow={'sh'}, path=path)\n"
            "    async with open_runtime([module]) as runtime:\n"
            "        arguments = {'command': sys.argv[2], '__sessionId': 's'}\n"
            "        await runtime.call_tool('workspace__execute_command', arguments)\n"
            "        await trio.sleep_forever()\n"
            "trio.run(main)\n"
        )
        process = await trio.lowlevel.open_process(
            [sys.executable, "-c", server, str(tmp_path / "root"), command]
        )
        try:
            child = await read_pid(marker)
            strays.append(child)
            assert alive(child)
        finally:
            process.kill()
            await process.wait()
        await wait_until(lambda: reaped(child))

    async def test_a_supervisor_stopped_by_sigterm_takes_its_tree_down(
        self, tmp_path: Path, strays: list[int]
    ) -> None:
        """An operator's `kill` of a supervisor kills what is below it; nothing escapes."""
        script = (
            "echo $PPID > sup.tmp && mv sup.tmp sup; "
            "sleep 300 & echo $! > bg.tmp && mv bg.tmp bg; wait"
        )
        async with running(tmp_path, allow={"sh"}) as runtime:
            process_id = await start(runtime, "s1", sh(script))
            (directory,) = session_directories(tmp_path)
            supervisor = await read_pid(directory / "sup")
            child = await read_pid(directory / "bg")
            strays.append(child)
            os.kill(supervisor, signal.SIGTERM)
            polled = await finished(runtime, "s1", process_id)
            await wait_until(lambda: reaped(child))
        assert (polled["status"], polled["exitCode"]) == ("killed", -signal.SIGKILL)

    async def test_a_command_that_kills_its_supervisor_is_reported_killed(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The same user can kill a supervisor (a known limit): the call says so, nothing hangs."""
        async with running(tmp_path, allow={"sh"}) as runtime:
            # It waits for a go, so that the supervisor has reported the start.
            wait = "while [ ! -e go ]; do sleep 0.01; done; kill -9 $PPID; sleep 0.2"
            process_id = await start(runtime, "s1", sh(wait))
            (directory,) = session_directories(tmp_path)
            _touch(directory / "go")
            polled = await finished(runtime, "s1", process_id)
        assert (polled["status"], polled["exitCode"]) == ("killed", -signal.SIGKILL)
        assert any("ended (-9) before its command" in r.getMessage() for r in caplog.records)

    async def test_a_command_that_stops_its_supervisor_still_dies_with_the_session(
        self, tmp_path: Path, strays: list[int]
    ) -> None:
        """SIGSTOP to its supervisor: woken at stop, it kills the tree and gives its place back."""
        script = (
            "echo $PPID > sup.tmp && mv sup.tmp sup; "
            "sleep 300 & echo $! > bg.tmp && mv bg.tmp bg; kill -STOP $PPID; wait"
        )
        async with running(tmp_path, allow={"sh"}, max_processes_total=1) as runtime:
            await start(runtime, "s1", sh(script))
            (directory,) = session_directories(tmp_path)
            supervisor = await read_pid(directory / "sup")
            child = await read_pid(directory / "bg")
            strays += [child, supervisor]
            await wait_until(lambda: _state_of(supervisor) == "T")
            await runtime.end_session("s1")
            after = await start(runtime, "s2", sh("true"))
        assert reaped(supervisor)
        assert reaped(child)
        assert after.startswith("proc_")  # the stopped supervisor no longer holds the only place

    async def test_a_supervisor_kept_stopped_is_killed_and_reaped(
        self, tmp_path: Path, strays: list[int]
    ) -> None:
        """Stopped again and again from outside its tree, it is killed: no place is held for good.

        What still runs below it then escapes (a known limit): the test kills it.
        """
        script = "echo $PPID > sup.tmp && mv sup.tmp sup; echo $$ > me.tmp && mv me.tmp me"
        async with running(tmp_path, allow={"sh"}, max_processes_total=1) as runtime:
            await start(runtime, "s1", sh(f"{script}; exec sleep 300"))
            (directory,) = session_directories(tmp_path)
            supervisor = await read_pid(directory / "sup")
            strays += [supervisor, await read_pid(directory / "me")]
            async with _stopping(supervisor):
                await runtime.end_session("s1")
            after = await start(runtime, "s2", sh("true"))
        assert reaped(supervisor)
        assert after.startswith("proc_")

    async def test_what_an_early_dead_supervisor_left_in_stderr_cannot_forge_log_lines(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        """That stderr is the command's too: it is logged escaped, on one line, and cut."""
        forged = "\n2026-01-01 00:00:00,000 ERROR actors.mcp: forged\x1b[2J"
        fake = tmp_path / "supervisor.py"  # dies before its report, as one killed at once would
        fake.write_text(f"import sys\nsys.stderr.write({'x' * 5000 + forged!r})\nsys.exit(3)\n")
        monkeypatch.setattr(_workspace, "_SUPERVISOR", fake)
        async with running(tmp_path / "root") as runtime:
            message = await error(runtime, "execute_command", "s1", command=python("1"))

            def logged() -> list[str]:
                return [r.getMessage() for r in caplog.records if "before it reported" in r.msg]

            await wait_until(lambda: bool(logged()))
        (line,) = logged()
        assert message == f"Error: cannot start {PYTHON!r}: its supervisor exited first"
        assert "\n" not in line
        assert "\x1b" not in line
        assert line.endswith(r"forged\x1b[2J'")
        assert len(line) < 1200


def _state_of(pid: int) -> str:
    """The state letter of `pid` in /proc (``T``: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@contextlib.asynccontextmanager
async def _stopping(pid: int) -> AsyncIterator[None]:
    """Another process sends `pid` SIGSTOP every millisecond while the block runs."""
    # Through a pidfd, so that the loop can never stop another process that reuses the pid.
    code = (
        "import os, signal, sys, time\n"
        "fd = os.pidfd_open(int(sys.argv[1]))\n"
        "while True:\n"
        "    try:\n"
        "        signal.pidfd_send_signal(fd, signal.SIGSTOP)\n"
        "    except ProcessLookupError:\n"
        "        break\n"
        "    time.sleep(0.001)\n"
    )
    stopper = await trio.lowlevel.open_process([sys.executable, "-c", code, str(pid)])
    try:
        await wait_until(lambda: _state_of(pid) == "T")
        yield
    finally:
        stopper.kill()
        await stopper.wait()


class TestOutputCap:
    async def test_a_program_writing_past_the_cap_is_stopped(self, tmp_path: Path) -> None:
        """`yes` gets SIGXFSZ at file_cap bytes; the output is flagged truncated."""
        async with running(tmp_path, allow={"yes"}, file_cap=64 * 1024) as runtime:
            polled = await finished(runtime, "s1", await start(runtime, "s1", "yes"))
        assert (polled["status"], polled["exitCode"]) == ("killed", -signal.SIGXFSZ)
        assert polled["truncated"] is True
        assert polled["stdout"] == "y\n" * (32 * 1024)  # output_cap is the default 64 KiB

    async def test_no_file_grows_past_the_cap(self, tmp_path: Path) -> None:
        """A program that ignores SIGXFSZ gets EFBIG; stdout and its own files stop at the cap."""
        cap = 100_000
        code = (
            "import os, sys\n"
            "def fill(fd):\n"
            "    try:\n"
            "        os.write(fd, b'x' * 300_000)\n"
            "        os.write(fd, b'x' * 300_000)\n"
            "    except OSError as exc:\n"
            "        return exc.errno, os.fstat(fd).st_size\n"
            "print(fill(1), fill(os.open('big', os.O_WRONLY | os.O_CREAT)), file=sys.stderr)\n"
        )
        async with running(tmp_path, file_cap=cap, output_cap=100) as runtime:
            polled = await finished(runtime, "s1", await start(runtime, "s1", python(code)))
        assert polled["stderr"] == f"{(errno.EFBIG, cap)} {(errno.EFBIG, cap)}\n"
        assert polled["stdout"] == "x" * 100
        assert polled["truncated"] is True


class TestProcessCaps:
    async def test_background_processes_count_against_the_session(
        self, tmp_path: Path, strays: list[int]
    ) -> None:
        """A command counts until what it left behind exits, so leaders that exit gain nothing."""
        async with running(tmp_path, allow={"sh"}, max_processes=1) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", sh(BACKGROUND_CHILD)))
            refused = await error(runtime, "execute_command", "s1", command=sh("true"))
            (directory,) = session_directories(tmp_path)
            child = await read_pid(directory / "bg")
            strays.append(child)
            os.kill(child, signal.SIGKILL)
            await wait_until(lambda: reaped(child))
            again = await _start_when_free(runtime, "s1", sh("true"))
        assert refused.startswith("Error: this session already runs 1 processes (the limit);")
        assert again.startswith("proc_")

    async def test_the_total_cap_spans_sessions(self, tmp_path: Path) -> None:
        """max_processes_total bounds every session together, with its own message."""
        sleep = python("import time; time.sleep(60)")
        async with running(tmp_path, max_processes=2, max_processes_total=3) as runtime:
            await start(runtime, "s1", sleep)
            await start(runtime, "s1", sleep)
            await start(runtime, "s2", sleep)
            from_s2 = await error(runtime, "execute_command", "s2", command=sleep)
            from_s3 = await error(runtime, "execute_command", "s3", command=sleep)
        expected = (
            "Error: the workspace already runs 3 processes across all sessions "
            "(the limit is 3); try again when some have finished"
        )
        assert from_s2 == from_s3 == expected

    async def test_one_tenant_cannot_take_every_place(self, tmp_path: Path) -> None:
        """max_processes_per_tenant: alpha's sessions together stop at it; beta still starts."""
        sleep = python("import time; time.sleep(60)")
        async with running(
            tmp_path, max_processes=2, max_processes_per_tenant=3, max_processes_total=10
        ) as runtime:
            for session in ("alpha/a", "alpha/a", "alpha/b"):
                await start(runtime, session, sleep)
            refused = await error(runtime, "execute_command", "alpha/c", command=sleep)
            other = await start(runtime, "beta/a", sleep)
        assert refused == (
            "Error: tenant 'alpha' already runs 3 processes across its sessions "
            "(the limit is 3); try again when some have finished"
        )
        assert other.startswith("proc_")

    async def test_a_stopped_session_gives_its_share_back(self, tmp_path: Path) -> None:
        """When a session's actor expires, its processes no longer count against the total."""
        sleep = python("import time; time.sleep(60)")
        config = RuntimeConfig(ttl=2.0)
        async with running(tmp_path, config, max_processes_total=1) as runtime:
            await start(runtime, "s1", sleep)
            refused = await error(runtime, "execute_command", "s2", command=sleep)
            await wait_until(lambda: runtime.statistics().expired >= 1)
            accepted = await _start_when_free(runtime, "s2", sleep)
        assert refused.startswith("Error: the workspace already runs 1 processes")
        assert accepted.startswith("proc_")

    async def test_a_session_forgets_its_oldest_finished_commands(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Records are bounded: past KEPT_RECORDS, the oldest finished one is "not found"."""
        monkeypatch.setattr(_workspace, "KEPT_RECORDS", 3)
        quick = python("pass")
        async with running(tmp_path) as runtime:
            ids = []
            for _ in range(4):
                ids.append(await start(runtime, "s1", quick))
                await finished(runtime, "s1", ids[-1])
            forgotten = await error(runtime, "poll_process", "s1", processId=ids[0])
            kept = [await finished(runtime, "s1", process_id) for process_id in ids[1:]]
        assert forgotten == f"Error: process {ids[0]!r} not found"
        assert [poll["status"] for poll in kept] == ["exited"] * 3


async def _start_when_free(runtime: Runtime, session: str, command: str) -> str:
    """Start `command` once the session's last supervisor has exited and been reaped."""
    with trio.fail_after(60):
        while True:
            result = await call(runtime, "execute_command", session, command=command)
            if not result.is_error:
                assert result.structured_content is not None
                process_id: str = result.structured_content["processId"]
                return process_id
            assert "the limit" in result.first_text
            await trio.sleep(0.02)


class TestSessionDirectories:
    async def test_the_root_cannot_be_listed_and_sessions_are_private(self, tmp_path: Path) -> None:
        """The root has no read permission for anyone; each session directory is its owner's."""
        async with running(tmp_path) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", python("1")))
            (root,) = private_roots(tmp_path)
            (directory,) = listed(root)
            modes = stat.S_IMODE(root.stat().st_mode), stat.S_IMODE(directory.stat().st_mode)
        assert modes == (0o300, 0o700)

    @pytest.mark.skipif(
        os.geteuid() == 0 and shutil.which("setpriv") is None,
        reason="root reads any directory, and setpriv is missing to run ls as a user would",
    )
    async def test_a_command_cannot_list_the_other_sessions(self, tmp_path: Path) -> None:
        """`ls ..` from a session fails: the root grants no read permission, even to its owner."""
        # As root, drop the two capabilities that bypass permissions, as a
        # server running as an ordinary user never had them.
        as_user = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
        command = shlex.join([*(as_user if os.geteuid() == 0 else []), "ls", ".."])
        async with running(tmp_path, allow={"ls", "setpriv"}) as runtime:
            polled = await finished(runtime, "s1", await start(runtime, "s1", command))
            own = await finished(runtime, "s1", await start(runtime, "s1", "ls ."))
        assert polled["exitCode"] != 0
        assert "Permission denied" in polled["stderr"]
        assert own["exitCode"] == 0

    async def test_a_session_id_does_not_give_away_its_directory(self, tmp_path: Path) -> None:
        """Names are keyed per module: the same id gets another name, derived from nothing known."""
        where = python("import os; print(os.getcwd())")
        directories = []
        for _ in range(2):
            async with running(tmp_path) as runtime:
                polled = await finished(runtime, "tenant", await start(runtime, "tenant", where))
                directories.append(Path(polled["stdout"].strip()).name)
        digest = hashlib.sha256(b"tenant").hexdigest()
        assert directories[0] != directories[1]
        for name in directories:
            assert "tenant" not in name
            assert name not in digest


class TestRootLifetime:
    async def test_the_default_root_is_removed_at_a_clean_exit(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With no root given, the temporary root exists while sessions run and not after."""
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        module = workspace(allow={PYTHON}, path=SEARCH_PATH)
        assert entries(tmp_path) == []  # nothing is made before a session needs it
        async with open_runtime([module]) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", python("1")))
            await finished(runtime, "s2", await start(runtime, "s2", python("1")))
            assert len(session_directories(tmp_path)) == 2
        assert entries(tmp_path) == []

    async def test_the_root_goes_with_the_last_session_and_comes_back(self, tmp_path: Path) -> None:
        """After every session expired the root is gone; the next session makes a new one."""
        async with running(tmp_path, RuntimeConfig(ttl=1.0)) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", python("open('f', 'w')")))
            assert len(private_roots(tmp_path)) == 1
            await wait_until(lambda: runtime.statistics().live_actors == 0)
            assert entries(tmp_path) == []
            again = await finished(
                runtime, "s1", await start(runtime, "s1", python("import os; print(os.listdir())"))
            )
        assert again["stdout"] == "[]\n"
        assert entries(tmp_path) == []

    async def test_a_removed_root_is_made_again_before_the_next_call(self, tmp_path: Path) -> None:
        """Something deleting the whole root (a temp cleaner) does not break the session."""
        async with running(tmp_path) as runtime:
            await finished(runtime, "s1", await start(runtime, "s1", python("1")))
            (root,) = private_roots(tmp_path)
            root.chmod(0o700)
            shutil.rmtree(root)
            polled = await finished(runtime, "s1", await start(runtime, "s1", python("print(1)")))
            mode = stat.S_IMODE(root.stat().st_mode)
        assert polled["stdout"] == "1\n"
        assert mode == 0o300

    async def test_an_unusable_parent_fails_the_call_and_leaves_nothing(
        self, tmp_path: Path
    ) -> None:
        """A root that cannot be made crashes that session's actor; nothing is made or held."""
        blocker = tmp_path / "file"
        blocker.write_text("not a directory")
        async with running(blocker / "root") as runtime:
            with pytest.raises(ActorCrashedError, match="Not a directory"):
                await call(runtime, "execute_command", "s1", command=python("1"))
        assert entries(tmp_path) == [blocker]


def test_the_supervisor_is_standard_library_only() -> None:
    """It runs with -I -S: importing it must need nothing from the package or site-packages."""
    supervisor = Path(__file__).parents[2] / "actors" / "modules" / "_supervisor.py"
    code = f"import runpy; runpy.run_path({str(supervisor)!r}, run_name='not_main')"
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None,
    reason="as root, setpriv is needed to run the supervisor's code as another user",
)
def test_a_process_of_another_user_does_not_crash_the_supervisor() -> None:
    """EPERM (a setuid program, sudo) is skipped like an exited process, not raised.

    The supervisor's code runs as nobody, in a session of its own, against this
    test's process and group (root's); signal 0 only asks whether it may signal them.
    Its source comes on stdin, read here: nobody may not be able to read the checkout
    (a clone under a 0700 folder), nor enter it, so it runs from ``/``.
    """
    supervisor = Path(__file__).parents[2] / "actors" / "modules" / "_supervisor.py"
    code = (
        "import sys\n"
        "module = {'__name__': 'not_main'}\n"
        "exec(compile(sys.stdin.read(), sys.argv[1], 'exec'), module)\n"
        "module['_signal'](int(sys.argv[2]), 0)\n"
        "supervision = module['_Supervisor'](-1)\n"
        "supervision.command = int(sys.argv[3])\n"
        "supervision._signal_group(0)\n"
    )
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    command = [*(as_nobody if os.geteuid() == 0 else []), sys.executable, "-I", "-S", "-c", code]
    targets = [str(supervisor), str(os.getpid()), str(os.getpgrp())]
    result = subprocess.run(
        [*command, *targets],
        input=supervisor.read_bytes(),
        capture_output=True,
        check=False,
        start_new_session=True,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr
