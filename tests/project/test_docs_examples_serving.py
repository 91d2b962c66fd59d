"""The serving, operating and cluster pages' examples (docs_src/serving/), run for real.

Each test runs or imports a file that a page of docs/guides/, docs/concepts/ or
docs/performance.md includes, against real ``serve`` subprocesses, the official
SDK client, a real runtime or a real cluster, and checks what it prints or
answers against what the page says. A last group checks that the pages include
only files that exist here, that every file here is included, and that the
tests a page cites exist.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from protocol import HANDLE_ARGUMENT, HANDLE_REQUIRED, HANDLE_TOOL

from .._mcp_helpers import http_server, raw_server, texts
from .._postgres import fresh_postgres_url_fixture, postgres_server_fixture  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from collections.abc import Iterator

# The SDK client's SSE reader leaves httpx2's response generators unexhausted.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "docs_src" / "serving"
TOKENS_FILE = SOURCES / "tokens.txt"
ALPHA = "Zq9#xK2pLw7Vn4Rt3sYbT0uQ"  # the tokens file's token bound to tenant alpha
GATEWAY = "hB1vR8mC4nW6eK2jL9pX5tZ0"  # and its gateway token
PAGES = (
    [
        ROOT / "docs" / "guides" / name
        for name in (
            "serving.md",
            "tenants.md",
            "oauth.md",
            "proxies.md",
            "operating.md",
            "cluster.md",
            "benchmarks.md",
        )
    ]
    + [
        ROOT / "docs" / "concepts" / name
        for name in ("how-a-call-travels.md", "guarantees.md", "security.md")
    ]
    + [ROOT / "docs" / "performance.md"]
)
INCLUDE = re.compile(r'--8<-- "([^":]+)(?::[^"]*)?"')


@pytest.fixture
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own: the SDK's stdio client passes a server HOME, not XDG_STATE_HOME."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MCP_ACTORS_SESSION", raising=False)
    return tmp_path


class TestServing:
    """docs/guides/serving.md and docs/guides/tenants.md."""

    async def test_stdio_client_sees_only_its_named_sessions_state(
        self, private_home: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """stdio_client.py prints s1's goal, then s2's empty plan; state is in ~/.local/state."""
        from docs_src.serving import stdio_client

        await stdio_client.main()
        assert capsys.readouterr().out == "Goals (1):\n- g1: Learn Rust\nNo goals yet.\n"
        assert (private_home / ".local" / "state" / "mcp-actors" / "state.db").exists()

    async def test_end_session_ends_the_connections_own_session(
        self, private_home: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """end_session.py: calls naming no session land in connection-…; session__end empties it."""
        from docs_src.serving import end_session

        await end_session.main()
        lines = capsys.readouterr().out.splitlines()
        assert lines[:2] == ["Goals (1):", "- g1: Draft the talk"]
        assert re.fullmatch(
            r"Session 'connection-\S+' ended: its state is gone \(1 stored item\(s\) deleted\)\.",
            lines[2],
        ), lines[2]
        assert lines[3:] == ["No goals yet."]

    async def test_session_end_is_listed_only_when_allowed(self) -> None:
        """Without --allow-end-session, session__end is neither listed nor callable."""
        async with raw_server("--state", "memory") as server:
            await server.initialize()
            listed = await server.request("tools/list", {})
            names = {tool["name"] for tool in listed["result"]["tools"]}
            assert "planning__create_goal" in names
            assert "session__end" not in names

    def test_serve_from_python_reads_the_tokens_file(self) -> None:
        """serve_from_python.py's options: the tokens file's two tokens, one bound to alpha."""
        from docs_src.serving import serve_from_python

        options = serve_from_python.options(TOKENS_FILE)
        options.check()
        assert dict(options.tokens) == {ALPHA: "alpha", GATEWAY: None}
        assert options.modules == ("planning", "content_store")

    async def test_the_http_clients_against_the_script_server(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """serve_from_python.py serves; http_client.py and tenants_client.py print what the
        pages say; a client without an Mcp-Session-Id starts a conversation, or is refused."""
        from docs_src.serving import http_client, tenants_client

        # The script's own options, on a free port and in memory (its file would outlive the test).
        script = (
            "import sys, attrs; from pathlib import Path; "
            f"sys.path.insert(0, {str(ROOT)!r}); "
            "from actors.server import configure_logging, run; "
            "configure_logging('info'); "
            "from docs_src.serving.serve_from_python import options; "
            f"run(attrs.evolve(options(Path({str(TOKENS_FILE)!r})), "
            "http=('127.0.0.1', 0), state='memory'))"
        )
        async with http_server(command=(sys.executable, "-c", script)) as server:
            await http_client.main(server.url)
            assert capsys.readouterr().out == "Goals (1):\n- g1: Ship\n"

            await tenants_client.main(server.url)
            assert capsys.readouterr().out.splitlines() == [
                "True session 'beta/conversation-1' is outside tenant 'alpha' of this token; "
                "name a session 'alpha' or 'alpha/…'",
                "alpha/conversation-2: Goals (1):",
                "- g1: Ship",
                "beta/conversation-1: No goals yet.",
            ]
            # The tenant client's own HTTP session, and its goal, ended with it.
            ended = r"the connection of session 'alpha/\w+' closed: ended it \(1 stored item"
            await server.log.wait_for(re.compile(ended), server.process)  # within the log's delay
            # The 2026 protocol sends no Mcp-Session-Id: a call that names no session and
            # carries no handle is told to start a conversation; one started is its own.
            async with server.session(ALPHA, era="modern") as alpha:
                nameless = await alpha.call_tool("planning__create_goal", {"goal": "Bucket"})
                assert texts(nameless) == HANDLE_REQUIRED
                started = await alpha.call_tool(HANDLE_TOOL, {})
                handle = {HANDLE_ARGUMENT: (started.structured_content or {})[HANDLE_ARGUMENT]}
                await alpha.call_tool("planning__create_goal", {"goal": "Kept", **handle})
                kept = await alpha.call_tool("planning__list_goals", handle)
                assert texts(kept) == "Goals (1):\n- g1: Kept"
            async with server.session(GATEWAY, era="modern") as gateway:
                refused = await gateway.call_tool("planning__list_goals", {})
                assert texts(refused) == HANDLE_REQUIRED

    async def test_jsonrpc_exchanges_are_answered_as_shown(self) -> None:
        """Each → line of jsonrpc_exchanges.txt, sent over stdio, gets exactly its ← line."""
        lines = (SOURCES / "jsonrpc_exchanges.txt").read_text(encoding="utf-8").splitlines()
        sent = [line.removeprefix("→ ") for line in lines[0::2]]
        expected = [json.loads(line.removeprefix("← ")) for line in lines[1::2]]
        assert all(line.startswith("→ ") for line in lines[0::2])
        assert len(sent) == len(expected)
        async with raw_server("--state", "memory") as server:
            await server.initialize()  # 2025-11-25, which has no batches
            for request, answer in zip(sent, expected, strict=True):
                await server.send(request.encode())
                assert await server.receive_json() == answer, request

    async def test_a_batch_is_processed_under_2025_03_26_up_to_32_messages(self) -> None:
        """The page's rules for batches: answered as one array; 33 messages get one error."""
        ping = {"jsonrpc": "2.0", "method": "ping"}
        async with raw_server("--state", "memory") as server:
            await server.initialize("2025-03-26")
            await server.send(json.dumps([{**ping, "id": 1}, {**ping, "id": 2}]).encode())
            answers = await server.receive_json()
            assert sorted(answer["id"] for answer in answers) == [1, 2]
            await server.send(json.dumps([{**ping, "id": n} for n in range(33)]).encode())
            too_many = await server.receive_json()
            assert too_many["id"] is None
            assert too_many["error"]["code"] == -32600

    async def test_an_unknown_tool_is_a_jsonrpc_error(self) -> None:
        """Unknown tools are -32602 whatever the context; bad arguments an isError result."""
        async with http_server("--state", "memory") as server, server.session() as session:
            with pytest.raises(MCPError) as raised:
                await session.call_tool("planning__nope", {}, meta={"sessionId": "s1"})
            assert raised.value.error.code == -32602
            bad = await session.call_tool("planning__create_goal", {"goal": 3})
            assert bad.is_error
            assert "$.goal: expected a string" in texts(bad)


class TestProxies:
    """docs/guides/proxies.md."""

    async def test_allow_host_and_trusted_proxy(self) -> None:
        """The public name is served, an upstream's name gets 421 naming the option, and a
        trusted proxy's X-Forwarded-For names the client in the refusal log."""
        token = "proxy-doc-token-0123456789"
        args = ("--token", token, "--allow-host", "mcp.example.com", "--trusted-proxy", "127.0.0.1")
        async with http_server(*args, "--state", "memory") as server:
            base = server.url.removesuffix("/mcp")
            async with httpx2.AsyncClient() as http:
                public = await http.get(f"{base}/healthz", headers={"Host": "mcp.example.com"})
                assert public.status_code == 200
                upstream = await http.post(server.url, json={}, headers={"Host": "mcp_actors"})
                assert upstream.status_code == 421
                assert "--allow-host 'mcp_actors'" in upstream.text
                foreign = await http.post(
                    server.url,
                    json={},
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Origin": "http://evil.example",
                        "X-Forwarded-For": "203.0.113.7",
                    },
                )
                assert foreign.status_code == 403
            await server.log.wait_for(re.compile(r"203\.0\.113\.7"), server.process, 5)

    def test_the_page_includes_the_tested_nginx_conf(self) -> None:
        """proxies.md includes examples/nginx.conf itself, which tests/server/test_proxy.py runs."""
        page = (ROOT / "docs" / "guides" / "proxies.md").read_text(encoding="utf-8")
        assert '--8<-- "examples/nginx.conf"' in page
        assert "examples/nginx.conf" in (ROOT / "tests" / "_nginx.py").read_text()

    def test_the_cluster_page_includes_the_tested_fronts_conf(self) -> None:
        """cluster.md includes examples/nginx-fronts.conf itself, which
        tests/cluster/test_cluster_fronts.py runs (through tests/_nginx.py)."""
        page = (ROOT / "docs" / "guides" / "cluster.md").read_text(encoding="utf-8")
        assert '--8<-- "examples/nginx-fronts.conf"' in page
        assert "nginx-fronts.conf" in (ROOT / "tests" / "_nginx.py").read_text()
        fronts = ROOT / "tests" / "cluster" / "test_cluster_fronts.py"
        assert "in_front_of_fronts" in fronts.read_text()


class TestOperating:
    """docs/guides/operating.md."""

    async def test_observer_counts_and_prometheus_agree(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """observer.py prints its own counts and the same in Prometheus's exposition."""
        from docs_src.serving import observer

        await observer.main()
        assert capsys.readouterr().out.splitlines() == [
            "[(('planning__create_goal', 'ok'), 1), (('planning__mark_todo', 'tool_error'), 1)]",
            'mcp_actors_calls_total{outcome="ok",tool="planning__create_goal"} 1.0',
            'mcp_actors_calls_total{outcome="tool_error",tool="planning__mark_todo"} 1.0',
        ]

    async def test_health_metrics_and_the_json_log_line(self) -> None:
        """/healthz and /readyz without a token; /metrics for a gateway token only; a call's
        JSON log line has log_line.json's fields."""
        args = ("--tokens-file", str(TOKENS_FILE), "--metrics", "--log-format", "json")
        async with http_server(*args, "--state", "memory") as server:
            base = server.url.removesuffix("/mcp")
            async with server.session(ALPHA) as alpha:
                meta = {"sessionId": "alpha/conversation-1"}
                await alpha.call_tool("planning__create_goal", {"goal": "Ship"}, meta=meta)
            async with httpx2.AsyncClient() as http:
                healthy = await http.get(f"{base}/healthz")
                assert (healthy.status_code, healthy.text.strip()) == (200, "ok")
                ready = await http.get(f"{base}/readyz")
                assert (ready.status_code, ready.text.strip()) == (200, "ready")
                assert (await http.get(f"{base}/metrics")).status_code == 401
                tenant = await http.get(f"{base}/metrics", headers=_bearer(ALPHA))
                assert tenant.status_code == 403
                gateway = await http.get(f"{base}/metrics", headers=_bearer(GATEWAY))
                assert gateway.status_code == 200
                assert 'mcp_actors_calls_total{outcome="ok",tool="planning__create_goal"} 1.0' in (
                    gateway.text
                )
            await server.log.wait_for(re.compile(r'"event": \{'), server.process)  # the call's
            records = [
                json.loads(line) for line in server.log.text().splitlines() if line.startswith("{")
            ]
        shown = json.loads((SOURCES / "log_line.json").read_text(encoding="utf-8"))
        [call] = [record for record in records if "event" in record]
        assert _shape(call) == _shape(shown)
        for record in (call, shown):
            del record["time"], record["event"]["ms"]
            record["message"] = record["message"].rsplit(" ", 2)[0]  # without "2.1 ms"
        assert call == shown


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _shape(record: Any) -> Any:
    """The keys of a JSON object, nested, with the type of each leaf (None for null)."""
    if isinstance(record, dict):
        return {key: _shape(value) for key, value in record.items()}
    return None if record is None else type(record).__name__


class TestCallPath:
    """docs/concepts/how-a-call-travels.md."""

    async def test_prepare_then_run(self, capsys: pytest.CaptureFixture[str]) -> None:
        """call_path.py: the keys, the result and its ServiceInfo, refusals before any actor."""
        from docs_src.serving import call_path

        await call_path.main()
        lines = capsys.readouterr().out.splitlines()
        assert lines[:3] == [
            "planning__create_goal {'goal': 'Ship'} ('planning', 's1', 'a1', None)",
            "Created goal g1: Ship ServiceInfo(server_name='planning', tool_name='create_goal', "
            "backend_type=<BackendType.BUILTIN: 'builtin'>)",
            "('content_store', 's1', None, None)",
        ]
        assert lines[3].startswith(
            "UnknownToolError: unknown tool 'planning__create_gaol'; did you mean "
            "'planning__create_goal'? known tools: "
        )
        assert lines[4:] == [
            "ArgumentsError: invalid arguments: $.goal: expected a string, got int",
            "ContextError: unknown context field '__sessionid' in arguments; did you mean "
            "'__sessionId'? the accepted ones are __sessionId, __session_id, __assistantId, "
            "__assistant_id, __threadId, __thread_id",
        ]


@pytest.fixture
def local_ray() -> Iterator[None]:
    """A local Ray instance for one test (the example expects Ray started by its caller)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


class TestCluster:
    """docs/guides/cluster.md."""

    @pytest.mark.usefixtures("local_ray")
    def test_a_session_keeps_its_state_through_a_handover(
        self, fresh_postgres_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """cluster.py on two shards over PostgreSQL: a shard added and removed, the goal kept."""
        from docs_src.serving import cluster

        cluster.main(fresh_postgres_url)
        assert capsys.readouterr().out == "Created goal g1: Ship\nGoals (1):\n- g1: Ship\n"


class TestBenchmarks:
    """docs/guides/benchmarks.md."""

    def test_the_page_names_every_scenario(self) -> None:
        """The page's table of scenarios is the harness's list, in its order."""
        from benchmarks import SCENARIOS

        page = (ROOT / "docs" / "guides" / "benchmarks.md").read_text(encoding="utf-8")
        named = re.findall(r"^\| `([a-z_]+)` \|", page, flags=re.MULTILINE)
        assert named == list(SCENARIOS)

    def test_a_tiny_run_of_one_scenario(self, tmp_path: Path) -> None:
        """``python -m benchmarks --tiny --only isolation --json``: exit 0, no leak, one leaking
        replaced design."""
        out = tmp_path / "out.json"
        command = [sys.executable, "-m", "benchmarks", "--tiny", "--only", "isolation"]
        done = subprocess.run(
            [*command, "--json", str(out)], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        figures = {
            figure["name"]: figure["value"] for figure in json.loads(out.read_text())["figures"]
        }
        assert figures["runtime: leaked observations"] == 0
        assert figures["switch_context (replaced design): leaked observations"] > 0


class TestPages:
    """What the pages include and cite exists."""

    @pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
    def test_included_files_exist_and_no_python_is_inline(self, page: Path) -> None:
        """Every ``--8<--`` path exists; every ``python`` fence holds only an include."""
        text = page.read_text(encoding="utf-8")
        for path in INCLUDE.findall(text):
            assert (ROOT / path).is_file(), f"{page.name} includes {path}, which is not there"
        for block in re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
            assert INCLUDE.fullmatch(block.strip()), f"{page.name}: inline Python:\n{block}"

    def test_every_example_is_included_by_a_page(self) -> None:
        """No file in docs_src/serving/ is left out of the pages (and so out of sight)."""
        included = {
            path for page in PAGES for path in INCLUDE.findall(page.read_text(encoding="utf-8"))
        }
        here = {
            str(path.relative_to(ROOT))
            for path in SOURCES.iterdir()
            if path.is_file() and not path.name.startswith(".")
        }
        assert here <= included, f"not included by any page: {sorted(here - included)}"

    def test_the_tests_the_guarantees_cite_exist(self) -> None:
        """Every ``tests/…py::Class::test`` on the guarantees page names a real test."""
        page = (ROOT / "docs" / "concepts" / "guarantees.md").read_text(encoding="utf-8")
        cited = re.findall(r"`(tests/[\w/]+\.py)(?:::([\w:]+))?`", page)
        assert cited
        for path, name in cited:
            tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
            if name:
                assert name in set(_test_names(tree)), f"{path}::{name} does not exist"


def _test_names(tree: ast.Module) -> Iterator[str]:
    """Test functions, classes and their methods (``Class::method``), and the TestCase
    classes of state machines (``TestX = Machine.TestCase``)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name
        elif isinstance(node, ast.Assign):
            yield from (target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.ClassDef):
            yield node.name
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}::{member.name}"
