"""``python -m actors cluster``: the MCP front end of shards on a real local Ray, as a process.

The front is ``serve --http`` with shards behind it, so what the gate and the
tenant rules do is tested in process elsewhere (`tests/server/test_http_gate.py`);
here the SDK client checks that they hold in front of shards too, that each
session sees only its own state wherever it lives, that ``session__end``
reaches the session's shard, and that SIGTERM stops the shards and the local
Ray instance with them.
"""

from __future__ import annotations

import ipaddress
import os
import re
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

import httpx2
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from protocol import shard_for

from .._mcp_helpers import (
    CLUSTER,
    CLUSTER_STARTUP_TIMEOUT,
    LogFile,
    anonymous_and_foreign,
    bearer,
    http_server,
    service_of,
    texts,
)
from .._postgres import fresh_postgres_url_fixture, postgres_server_fixture  # noqa: F401  (fixtures)
from .._processes import (
    command_line_of,
    descendants,
    left_after,
    listening_addresses,
    name_of,
)

pytest.importorskip("ray")

pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]
ALPHA, GATEWAY = "Zq9#xK2pLw7Vn4Rt3sYbT0uQ", "hB1vR8mC4nW6eK2jL9pX5tZ0"
SESSIONS = [f"conversation-{n}" for n in range(8)]
ON_RAY = re.compile(r"cluster '[^']+' on Ray at (\S+): shard-0, shard-1")
LOCAL = ("--http", "127.0.0.1:0", "--state", "sqlite:////tmp/never.db")


async def test_the_front_serves_each_session_from_its_shard_refuses_and_stops(
    tmp_path: Path, fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{ALPHA}=alpha\n{GATEWAY}\n")
    assert {shard_for(s, ("shard-0", "shard-1")) for s in SESSIONS} == {"shard-0", "shard-1"}
    name = f"test-{uuid.uuid4().hex[:8]}"  # another cluster on this machine is none of ours
    args = ("--shards", "2", "--num-cpus", "2", "--state", fresh_postgres_url, "--name", name)
    args += ("--metrics", "--allow-end-session")
    async with http_server(
        *args, "--tokens-file", str(tokens), command=CLUSTER, startup=CLUSTER_STARTUP_TIMEOUT
    ) as server:
        ray_processes = descendants(server.process.pid)  # Ray's own: GCS, raylet, workers
        assert {"raylet", "gcs_server"} <= {name_of(pid) for pid, _ in ray_processes}
        # A loopback front: Ray's ports too, each of them; its token for this user only.
        listening = listening_addresses({pid for pid, _ in ray_processes})
        assert listening, "Ray listens somewhere"
        assert all(ipaddress.ip_address(address).is_loopback for address in listening), listening
        assert (Path.home() / ".ray" / "auth_token").stat().st_mode & 0o777 == 0o600
        async with server.session(GATEWAY) as gateway, server.session(ALPHA) as alpha:
            for session in SESSIONS:
                meta = {"sessionId": session}
                created = await gateway.call_tool(
                    "planning__create_goal", {"goal": f"goal of {session}"}, meta=meta
                )
                assert not created.is_error, texts(created)
            listed = [
                texts(await gateway.call_tool("planning__list_goals", {}, meta={"sessionId": s}))
                for s in SESSIONS
            ]
            # A call that names no session lands in the client's own HTTP session,
            # which session__end (enabled by --allow-end-session) ends on the shards.
            await gateway.call_tool("planning__create_goal", {"goal": "the gateway's own"})
            ended = await gateway.call_tool("session__end", {})
            after_end = await gateway.call_tool("planning__list_goals", {})
            mine = await alpha.call_tool(
                "planning__create_goal", {"goal": "Ship"}, meta={"sessionId": "alpha/c1"}
            )
            theirs = await alpha.call_tool("planning__list_goals", {"__sessionId": SESSIONS[1]})
            bad = await gateway.call_tool(
                "planning__create_goal", {"goal": 3}, meta={"sessionId": "x"}
            )
            # One more front, in a process of its own, for the same shards.
            third = {"sessionId": SESSIONS[2]}
            address = ON_RAY.search(server.log.text())
            assert address is not None, server.log.text()
            # A client of a Ray at a given address sends Ray's token (~/.ray/auth_token,
            # made by the local instance) only when told to.
            monkeypatch.setenv("RAY_AUTH_MODE", "token")
            async with http_server(
                "--address", address.group(1), "--join", "--name", name,
                "--state", fresh_postgres_url,
                "--token", GATEWAY, command=CLUSTER, startup=CLUSTER_STARTUP_TIMEOUT,
            ) as second, second.session(GATEWAY) as other:  # fmt: skip
                seen = texts(await other.call_tool("planning__list_goals", {}, meta=third))
            after_second = texts(await gateway.call_tool("planning__list_goals", {}, meta=third))
            anonymous, foreign = await anonymous_and_foreign(server.url, GATEWAY)
            # A scrape leaves out a shard slower than a few seconds to answer, as a busy
            # machine's may be: scrape again until both answered.
            async with httpx2.AsyncClient(timeout=60) as http:
                with trio.fail_after(120):
                    while True:
                        scraped = await http.get(
                            server.url.removesuffix("/mcp") + "/metrics", headers=bearer(GATEWAY)
                        )
                        if scraped.status_code != 200 or all(
                            f'shard="{shard}"' in scraped.text for shard in ("shard-0", "shard-1")
                        ):
                            break
                by_a_tenant = await http.get(
                    server.url.removesuffix("/mcp") + "/metrics", headers=bearer(ALPHA)
                )
            server.process.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                code = await server.process.wait()
        log = server.log.text()
    for session, text in zip(SESSIONS, listed, strict=True):
        assert text == f"Goals (1):\n- g1: goal of {session}"  # its own, nobody else's
    assert not ended.is_error, texts(ended)
    assert texts(after_end).startswith("No goals yet.")  # the stored state went with it
    assert not mine.is_error
    assert service_of(mine)["serverName"] == "planning"
    assert theirs.is_error
    assert texts(theirs).startswith(f"session '{SESSIONS[1]}' is outside tenant 'alpha'")
    assert bad.is_error
    assert "$.goal: expected a string" in texts(bad)
    assert seen == listed[2]  # the second front reached the same shard's state
    assert after_second == listed[2]  # and stopping it left the shards serving
    # Every call a shard ran is counted there, labelled with it; refusals at the front.
    assert scraped.status_code == 200, scraped.text
    assert by_a_tenant.status_code == 403  # every tenant's figures: a gateway's to read
    samples = [
        sample
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
    ]
    ran = [s for s in samples if s.name == "mcp_actors_calls_total"]
    assert {s.labels.get("shard") for s in ran} == {"shard-0", "shard-1"}
    assert sum(s.value for s in ran if s.labels["outcome"] == "ok") == 21  # all made above
    refused = [s for s in samples if s.name == "mcp_actors_calls_refused_total"]
    assert {s.labels["outcome"] for s in refused if "shard" not in s.labels} == {
        "outside_tenant",
        "bad_arguments",
    }
    assert anonymous.status_code == 401
    assert foreign.status_code == 403
    assert code == 0, log
    assert "outcome=outside_tenant" in log
    assert "SIGTERM received: shutting down" in log
    assert "Traceback" not in log
    left = left_after(ray_processes, 60)  # the command stopped its Ray: its daemons may lag
    assert not left, f"the local Ray instance outlived the command: {left}"


async def test_a_frozen_shard_holds_up_nothing_and_a_front_without_its_cluster_says_so(
    fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard that stops answering delays only the scrape (and is left out of it); a --join
    front whose cluster stopped is not ready, and its calls say why, not -32603."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    common = ("--state", fresh_postgres_url, "--name", name, "--metrics", "--token", GATEWAY)
    async with http_server(
        "--shards", "2", "--num-cpus", "2", *common,
        command=CLUSTER, startup=CLUSTER_STARTUP_TIMEOUT,
    ) as cluster:  # fmt: skip
        address = ON_RAY.search(cluster.log.text())
        assert address is not None, cluster.log.text()
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        async with http_server(
            "--address", address.group(1), "--join", *common,
            command=CLUSTER, startup=CLUSTER_STARTUP_TIMEOUT,
        ) as front:  # fmt: skip
            base = front.url.removesuffix("/mcp")
            (frozen, *_) = [
                pid
                for pid, _ in descendants(cluster.process.pid)
                if "ShardHost" in command_line_of(pid)
            ]
            os.kill(frozen, signal.SIGSTOP)
            try:
                answered_meanwhile, scraped = await _probe_while_scraping(base)
            finally:
                os.kill(frozen, signal.SIGCONT)
            cluster.process.send_signal(signal.SIGTERM)
            with trio.fail_after(CLUSTER_STARTUP_TIMEOUT):
                await cluster.process.wait()
            async with httpx2.AsyncClient(timeout=30) as http:
                with trio.fail_after(60):  # the front asks again at most once a second
                    while (ready := await http.get(base + "/readyz")).status_code == 200:  # noqa: ASYNC110
                        await trio.sleep(0.2)
            async with front.session(GATEWAY) as client:
                orphaned = await client.call_tool(
                    "planning__list_goals", {}, meta={"sessionId": "s"}
                )
            front_log = front.log.text()
    assert answered_meanwhile >= 10, "the front's other requests waited for the frozen shard"
    assert scraped.status_code == 200
    shards = {
        sample.labels.get("shard")
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
    }
    assert len(shards - {None}) == 1  # the frozen one was left out of that scrape
    assert "it did not answer in time" in front_log
    assert ready.status_code == 503
    assert f"cluster {name!r} cannot be reached" in ready.text
    assert orphaned.is_error
    assert texts(orphaned).startswith(f"the cluster {name!r} cannot be reached")
    assert "Traceback" not in front_log


async def _probe_while_scraping(base: str) -> tuple[int, httpx2.Response]:
    """Scrape /metrics, and meanwhile ask /healthz again and again: how many were answered
    while the scrape was still under way, and the scrape."""
    answered = 0
    scraped: list[httpx2.Response] = []
    async with httpx2.AsyncClient(timeout=60) as http:

        async def scrape() -> None:
            scraped.append(await http.get(base + "/metrics", headers=bearer(GATEWAY)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(scrape)
            while not scraped:
                healthz = await http.get(base + "/healthz")
                if not scraped:
                    assert healthz.status_code == 200
                    answered += 1
    return answered, scraped[0]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--http", "127.0.0.1:0", "--state", "memory"], "a cluster needs a store every shard"),
        (["--state", "sqlite:////tmp/never.db"], "--http HOST:PORT is required"),
        (["--http", "127.0.0.1:0"], "a cluster needs a store every shard"),
        (
            [*LOCAL, "--address", "auto", "--num-cpus", "2"],
            "--num-cpus sizes a local Ray instance",
        ),
        (["--name", "a/b"], "argument --name: expected 1 to 64 letters"),
        (["--shards", "0"], "argument --shards: expected a whole number from 1 to 1024"),
        ([*LOCAL, "--join"], "--join serves a cluster that runs already"),
        ([*LOCAL, "--allow-exec", "--token", GATEWAY], "unrecognized arguments: --allow-exec"),
        ([*LOCAL, "--session", "s"], "unrecognized arguments: --session s"),
    ],
)
def test_a_bad_command_line_is_refused_before_anything_starts(
    arguments: list[str], message: str
) -> None:
    result = subprocess.run(
        [*CLUSTER, *arguments], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Started a local Ray instance" not in result.stderr


def test_a_ray_without_token_authentication_is_refused_before_it_starts() -> None:
    """Ray's ports run code for whoever reaches them: RAY_AUTH_MODE=disabled is refused."""
    result = subprocess.run(
        [*CLUSTER, *LOCAL],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    assert result.returncode == 2, result.stderr
    assert "RAY_AUTH_MODE=disabled turns off Ray's token authentication" in result.stderr
    assert "starting a local Ray instance" not in result.stderr


async def test_joining_a_ray_that_does_not_answer_says_what_it_waits_for() -> None:
    """Ray waits long for an address that does not answer: the log says which one."""
    command = [*CLUSTER, "--address", "127.0.0.1:1", *LOCAL]
    with tempfile.TemporaryFile() as file:
        process = await trio.lowlevel.open_process(command, stderr=file)
        try:
            log = LogFile(file)
            await log.wait_for(re.compile("joining the Ray cluster at 127.0.0.1:1"), process)
        finally:
            process.kill()
            await process.wait()
