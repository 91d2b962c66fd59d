"""OAuth access tokens over Streamable HTTP, against a real issuer run by the test.

The issuer is an ASGI app served by hypercorn on 127.0.0.1 in the test's own
trio run: keys the test makes (RSA, EC, Ed25519), its JWK set, its RFC 8414
metadata, and switches for misbehaving (slow, huge, compressed, failing). The
MCP server is `http_app` in process (driven through httpx2's ASGI transport,
mostly by the official SDK client), and once a real ``mcp-actors serve``
process. Each refusal is checked to name its reason, to carry the RFC 6750 /
RFC 9728 challenge, and never to reach the runtime.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import hmac
import json
import logging
import re
import socket
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import httpx2
import hypercorn.config
import hypercorn.trio
import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.exceptions import MCPError

from actors._argparse import with_environment
from actors.server import ConfigurationError, OAuthSettings, ServeOptions
from actors.server._cli import _options, parser
from actors.server.auth._oauth import MAX_TOKEN_CHARACTERS

from .._mcp_helpers import (
    SERVE,
    InProcessHttp,
    http_server,
    in_process_http,
    initialize_request,
    texts,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from starlette.types import Receive, Scope, Send

# The SDK client's SSE reader leaves httpx2's response generators unexhausted when a
# session closes, and trio's finalizer warns about each one: client-side noise.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]

ROOT: Final = Path(__file__).resolve().parents[2]
RESOURCE: Final = "http://127.0.0.1:8765/mcp"
DOCUMENT_PATH: Final = "/.well-known/oauth-protected-resource/mcp"
METADATA_URL: Final = "http://127.0.0.1:8765" + DOCUMENT_PATH
ACCEPT: Final = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
INITIALIZE: Final = initialize_request("oauth-test")
STATIC: Final = "static-gateway-token-0123"

# Keys made once for the module: the issuer's, and an attacker's.
RSA_KEY: Final = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY: Final = ec.generate_private_key(ec.SECP256R1())
ED_KEY: Final = ed25519.Ed25519PrivateKey.generate()
ROTATED_KEY: Final = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ATTACKER_KEY: Final = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(key: Any, kid: str, alg: str) -> dict[str, Any]:
    public = key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        exported = RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(public, ec.EllipticCurvePublicKey):
        exported = ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        exported = OKPAlgorithm.to_jwk(public, as_dict=True)
    return {**exported, "kid": kid, "alg": alg, "use": "sig"}


PUBLISHED: Final = [
    _jwk(RSA_KEY, "rsa-1", "RS256"),
    _jwk(EC_KEY, "ec-1", "ES256"),
    _jwk(ED_KEY, "ed-1", "EdDSA"),
]
OMIT: Final = object()
"""A claim value that leaves the claim out."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: Mapping[str, Any], payload: Mapping[str, Any], signature: bytes = b"") -> str:
    """A compact JWS put together by hand (for what PyJWT refuses to sign)."""
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(payload).encode())
    return head + "." + _b64(signature)


@attrs.define(eq=False)
class Issuer:
    """An authorization server's public side: metadata and JWK set, with switches."""

    url: str = ""
    path: str = ""
    """The issuer's path (``/realms/acme``): its identifier is ``url + path``."""
    keys: list[dict[str, Any]] = attrs.field(factory=lambda: list(PUBLISHED))
    jwks: str = "ok"
    """What /jwks answers: ok, slow (until `release`), huge, gzip, error."""
    metadata: str = "rfc8414"
    """Which metadata it serves: rfc8414, openid (appended to the path), none, foreign."""
    release: trio.Event = attrs.field(factory=trio.Event)
    jwks_asked: trio.Event = attrs.field(factory=trio.Event)
    jwks_requests: int = 0
    metadata_requests: list[str] = attrs.field(factory=list)

    @property
    def identifier(self) -> str:
        return self.url + self.path

    def token(
        self,
        *,
        key: Any = RSA_KEY,
        kid: str | None = "rsa-1",
        alg: str = "RS256",
        typ: object = "JWT",
        **claims: Any,
    ) -> str:
        """An access token for RESOURCE, tenant acme, subject alice; `claims` change it.

        Its header's ``typ`` is PyJWT's default, ``JWT`` (None: no ``typ``)."""
        now = int(time.time())
        payload = {
            "iss": self.identifier,
            "aud": RESOURCE,
            "sub": "alice",
            "exp": now + 300,
            "iat": now,
            "tenant": "acme",
            "scope": "mcp:tools",
        }
        payload.update(claims)
        payload = {name: value for name, value in payload.items() if value is not OMIT}
        headers = {"typ": typ} if kid is None else {"kid": kid, "typ": typ}
        return jwt.encode(payload, key, algorithm=alg, headers=headers)

    def claims(self, **claims: Any) -> dict[str, Any]:
        """The claims `token` would sign."""
        token = self.token(**claims)
        decoded: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
        return decoded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        path = scope["path"]
        if path == "/jwks":
            await self._jwks(send)
        elif path.startswith("/.well-known/") or path.endswith("/.well-known/openid-configuration"):
            self.metadata_requests.append(path)
            await self._metadata(path, send)
        else:
            await _answer(send, 404, b"{}")

    async def _metadata(self, path: str, send: Send) -> None:
        served = {
            "rfc8414": f"/.well-known/oauth-authorization-server{self.path}",
            "foreign": f"/.well-known/oauth-authorization-server{self.path}",
            "openid": f"{self.path}/.well-known/openid-configuration",
        }.get(self.metadata)
        if path != served:
            await _answer(send, 404, b"{}")
            return
        named = "https://evil.example" if self.metadata == "foreign" else self.identifier
        document = {
            "issuer": named,
            "jwks_uri": self.url + "/jwks",
            "authorization_endpoint": self.identifier + "/authorize",
            "token_endpoint": self.identifier + "/token",
            "response_types_supported": ["code"],
        }
        await _answer(send, 200, json.dumps(document).encode())

    async def _jwks(self, send: Send) -> None:
        self.jwks_requests += 1
        self.jwks_asked.set()
        body = json.dumps({"keys": self.keys}).encode()
        if self.jwks == "slow":
            await self.release.wait()
        if self.jwks == "error":
            await _answer(send, 500, b"{}")
        elif self.jwks == "gzip":
            await _answer(send, 200, gzip.compress(body), [(b"content-encoding", b"gzip")])
        elif self.jwks == "huge":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            chunk = b" " * 65536
            for _ in range(16):  # 1 MiB of white space: valid JSON padding, far too much
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": body})
        else:
            await _answer(send, 200, body)


async def _answer(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    sent = [(b"content-type", b"application/json"), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": sent})
    await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def running(issuer: Issuer) -> AsyncIterator[Issuer]:
    """`issuer` served on an ephemeral 127.0.0.1 port until the block ends."""
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 1.0
    config.errorlog = logging.getLogger("test.issuer")
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        serve = functools.partial(hypercorn.trio.serve, issuer, config, shutdown_trigger=stop.wait)
        binds: list[str] = await nursery.start(serve)
        issuer.url = binds[0]
        try:
            yield issuer
        finally:
            issuer.release.set()
            stop.set()


def settings(served: Issuer, /, **changes: Any) -> OAuthSettings:
    """Tenants from the claim 'tenant', gateways by the scope 'mcp:gateway'."""
    given: dict[str, Any] = {
        "issuer": served.identifier,
        "resource": RESOURCE,
        "tenant_claim": "tenant",
        "gateway_scope": "mcp:gateway",
        **changes,
    }
    return OAuthSettings(**given)


@asynccontextmanager
async def serving(
    served: Issuer, /, tokens: Mapping[str, str | None] | None = None, **changes: Any
) -> AsyncIterator[InProcessHttp]:
    """`http_app` with OAuth of the issuer `served` (and static `tokens`), in process."""
    options = ServeOptions(
        http=("127.0.0.1", 8765), tokens=tokens or {}, oauth=settings(served, **changes)
    )
    options.check()
    async with in_process_http(options) as server:
        yield server


@pytest.fixture
async def issuer() -> AsyncIterator[Issuer]:
    async with running(Issuer()) as served:
        yield served


def refused_by(pattern: str) -> pytest.RaisesGroup[MCPError]:
    """What the SDK client raises when the server refuses its handshake, `pattern` in the text."""
    return pytest.RaisesGroup(pytest.RaisesExc(MCPError, match=pattern), flatten_subgroups=True)


async def post_initialize(server: InProcessHttp, token: str | None) -> httpx2.Response:
    async with server.http(token, ACCEPT) as http:
        return await http.post("/mcp", json=INITIALIZE)


def challenge(response: httpx2.Response) -> dict[str, str]:
    """The parameters of a response's Bearer challenge."""
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer "), value
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# ---- settings and the command line ----------------------------------------------------------


class TestSettings:
    """`OAuthSettings.check` through `ServeOptions.check`: one line naming the option."""

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            (
                {"issuer": "http://auth.example.com"},
                r"--oauth-issuer 'http://auth\.example\.com': must be https",
            ),
            (
                {"issuer": "auth.example.com"},
                r"--oauth-issuer 'auth\.example\.com': expected an https URL",
            ),
            ({"issuer": "https://auth.example.com/?x=1"}, r"--oauth-issuer .*no query"),
            ({"issuer": "https://user@auth.example.com"}, r"--oauth-issuer .*user name"),
            ({"resource": "http://mcp.example.com/mcp"}, r"--oauth-resource .*must be https"),
            ({"resource": 'https://mcp.example.com/"x'}, r"--oauth-resource .*expected a URL"),
            (
                {"jwks_url": "ftp://auth.example.com/jwks"},
                r"--oauth-jwks-url .*expected an https URL",
            ),
            ({"required_scopes": ("a b",)}, r"--oauth-required-scope 'a b': expected a scope"),
            ({"gateway_scope": 'x"y'}, r"--oauth-gateway-scope .*expected a scope"),
            ({"algorithms": ("HS256",)}, r"--oauth-algorithm 'HS256': only public-key algorithms"),
            ({"algorithms": ("none",)}, r"--oauth-algorithm 'none'"),
            ({"algorithms": ()}, r"at least one algorithm"),
            ({"tenant_claim": None, "gateway_scope": None}, r"needs --oauth-tenant-claim CLAIM"),
            ({"leeway": -1.0}, r"leeway must be from 0 to 300"),
            ({"jwks_timeout": 0.0}, r"jwks_timeout must be a positive number"),
        ],
    )
    def test_a_bad_setting_is_refused_naming_its_option(
        self, changes: dict[str, Any], message: str
    ) -> None:
        oauth = settings(Issuer(url="https://auth.example.com"), **changes)
        with pytest.raises(ConfigurationError, match=message):
            ServeOptions(http=("127.0.0.1", 0), oauth=oauth).check()

    @pytest.mark.parametrize(
        "issuer", ["http://127.0.0.1:9000", "http://localhost:9000/realms/x", "http://[::1]:9000"]
    )
    def test_http_is_accepted_on_loopback(self, issuer: str) -> None:
        ServeOptions(http=("127.0.0.1", 0), oauth=settings(Issuer(url=issuer))).check()

    def test_oauth_counts_as_auth_on_a_public_bind(self) -> None:
        """0.0.0.0 with OAuth alone starts; without it (or tokens) it is refused."""
        oauth = settings(Issuer(url="https://auth.example.com"))
        ServeOptions(http=("0.0.0.0", 0), oauth=oauth).check()
        with pytest.raises(ConfigurationError, match=r"without tokens.*--oauth-issuer"):
            ServeOptions(http=("0.0.0.0", 0)).check()

    def test_oauth_applies_to_http_only(self) -> None:
        oauth = settings(Issuer(url="https://auth.example.com"))
        with pytest.raises(ConfigurationError, match=r"--oauth-issuer.*apply to --http only"):
            ServeOptions(oauth=oauth).check()

    def test_exec_next_to_oauth_tenants_is_refused_as_next_to_tenant_tokens(self) -> None:
        oauth = settings(Issuer(url="https://auth.example.com"))
        with pytest.raises(ConfigurationError, match="OAuth claim 'tenant'"):
            ServeOptions(http=("127.0.0.1", 0), oauth=oauth, allow_exec=True).check()
        gateways_only = settings(Issuer(url="https://auth.example.com"), tenant_claim=None)
        ServeOptions(http=("127.0.0.1", 0), oauth=gateways_only, allow_exec=True).check()

    def test_the_metadata_url_inserts_the_well_known_path(self) -> None:
        """RFC 9728 §3.1: between the host and the resource's path."""
        oauth = settings(Issuer(url="https://auth.example.com"), resource="https://x.example/a/mcp")
        assert oauth.metadata_url == "https://x.example/.well-known/oauth-protected-resource/a/mcp"
        assert oauth.expected_audience == "https://x.example/a/mcp"
        assert settings(Issuer(), audience="api://mcp").expected_audience == "api://mcp"


class TestCommandLine:
    def test_options_and_environment_variables_make_the_settings(self) -> None:
        """Every --oauth-… option; MCP_ACTORS_OAUTH_… for those not on the command line."""
        environ = {
            "MCP_ACTORS_OAUTH_ISSUER": "https://auth.example.com",
            "MCP_ACTORS_OAUTH_REQUIRED_SCOPE": "mcp:read mcp:write",
            "MCP_ACTORS_OAUTH_ALGORITHM": "ES256 EdDSA",
        }
        cli = with_environment(parser(), environ)
        args = cli.parse_args(
            [
                "--http",
                "127.0.0.1:0",
                "--oauth-resource",
                "https://mcp.example.com/mcp",
                "--oauth-audience",
                "api://mcp",
                "--oauth-jwks-url",
                "https://auth.example.com/keys",
                "--oauth-tenant-claim",
                "org",
                "--oauth-gateway-scope",
                "mcp:gateway",
            ]
        )
        options = _options(args)
        options.check()
        assert options.oauth == OAuthSettings(
            issuer="https://auth.example.com",
            resource="https://mcp.example.com/mcp",
            audience="api://mcp",
            jwks_url="https://auth.example.com/keys",
            tenant_claim="org",
            gateway_scope="mcp:gateway",
            required_scopes=("mcp:read", "mcp:write"),
            algorithms=("ES256", "EdDSA"),
        )

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (
                [
                    "--oauth-issuer",
                    "http://auth.example.com",
                    "--oauth-resource",
                    RESOURCE,
                    "--oauth-tenant-claim",
                    "t",
                ],
                "--oauth-issuer 'http://auth.example.com': must be https",
            ),
            (["--oauth-tenant-claim", "t"], "--oauth-tenant-claim need(s) --oauth-issuer"),
            (["--oauth-issuer", "https://auth.example.com"], "needs --oauth-resource URL"),
            (["--oauth-algorithm", "HS256"], "'HS256' is not accepted"),
        ],
    )
    async def test_bad_oauth_options_stop_the_server_with_exit_2(
        self, argv: list[str], message: str
    ) -> None:
        result = await trio.run_process(
            [*SERVE, "--http", "127.0.0.1:0", *argv], capture_stderr=True, check=False
        )
        assert result.returncode == 2
        assert message in result.stderr.decode()

    async def test_a_server_without_oauth_never_imports_the_jose_library(self) -> None:
        """The server extra loads PyJWT only when an issuer is configured."""
        script = (
            "import sys\n"
            "from actors.server import ServeOptions, http_app\n"
            "from actors.server.http._app import authentication\n"
            "authentication(ServeOptions(http=('127.0.0.1', 0), tokens={'x' * 16: None}))\n"
            "print('jwt' in sys.modules)\n"
        )
        result = await trio.run_process([sys.executable, "-c", script], capture_stdout=True)
        assert result.stdout.decode().strip() == "False"


# ---- tokens, in process --------------------------------------------------------------------


class TestValidTokens:
    async def test_a_tenant_token_works_in_its_tenant_only(self, issuer: Issuer) -> None:
        """The tenant claim binds the token as TOKEN=TENANT does: acme and acme/… only."""
        async with serving(issuer) as server, server.session(issuer.token()) as alice:
            meta = {"sessionId": "acme/roadmap"}
            created = await alice.call_tool("planning__create_goal", {"goal": "Ship"}, meta=meta)
            mine = await alice.call_tool("planning__list_goals", {}, meta=meta)
            before = server.calls()
            theirs = await alice.call_tool("planning__list_goals", {"__sessionId": "beta/s"})
            refused_calls = server.calls() - before
            default = await alice.call_tool("planning__create_goal", {"goal": "scratch"})
        assert not created.is_error
        assert "g1: Ship" in texts(mine)
        assert theirs.is_error
        assert texts(theirs) == (
            "session 'beta/s' is outside tenant 'acme' of this token; "
            "name a session 'acme' or 'acme/…'"
        )
        assert refused_calls == 0
        assert not default.is_error

    async def test_a_call_naming_no_session_lands_in_the_tenants_http_session(
        self, issuer: Issuer, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="actors.mcp")
        async with serving(issuer) as server, server.session(issuer.token()) as alice:
            await alice.call_tool("planning__create_goal", {"goal": "scratch"})
        log = "\n".join(record.getMessage() for record in caplog.records)
        assert "caller=oauth:acme/alice tenant='acme'" in log
        assert "session='acme/" in log

    @pytest.mark.parametrize(
        "typ", ["at+jwt", "application/at+jwt", "AT+JWT", "Application/At+Jwt", "JWT", None]
    )
    async def test_an_access_tokens_type_or_none_is_accepted(
        self, issuer: Issuer, typ: str | None
    ) -> None:
        """RFC 9068's at+jwt in any case; also no typ, or the generic JWT that Keycloak,
        Entra ID and Auth0 put on their access tokens (`ACCESS_TOKEN_TYPES`)."""
        async with serving(issuer) as server:
            accepted = await post_initialize(server, issuer.token(typ=typ))
        assert accepted.status_code == 200, accepted.text

    @pytest.mark.parametrize(
        ("key", "kid", "alg"),
        [(RSA_KEY, "rsa-1", "RS256"), (EC_KEY, "ec-1", "ES256"), (ED_KEY, "ed-1", "EdDSA")],
    )
    async def test_each_kind_of_key_verifies(
        self, issuer: Issuer, key: Any, kid: str, alg: str
    ) -> None:
        async with serving(issuer) as server:
            opened = await post_initialize(server, issuer.token(key=key, kid=kid, alg=alg))
        assert opened.status_code == 200, opened.text

    async def test_a_token_without_a_kid_is_verified_by_the_one_key_that_fits(
        self, issuer: Issuer
    ) -> None:
        """Without a kid, the one key for its algorithm verifies it; with two, it is refused."""
        async with serving(issuer) as server:
            one = await post_initialize(server, issuer.token(kid=None))
        issuer.keys.append(_jwk(ROTATED_KEY, "rsa-2", "RS256"))
        async with serving(issuer) as server:
            two = await post_initialize(server, issuer.token(kid=None))
        assert one.status_code == 200
        assert two.status_code == 401
        assert (
            "the token names no key (no 'kid' in its header), and the issuer has 2 keys for "
            "RS256 tokens" in two.text
        )

    async def test_a_gateway_token_may_address_any_session(self, issuer: Issuer) -> None:
        """No tenant claim, but the gateway scope: any session, as a static gateway token."""
        gateway = issuer.token(tenant=OMIT, scope="mcp:tools mcp:gateway", sub="gw")
        async with serving(issuer) as server:
            async with server.session(issuer.token()) as alice:
                await alice.call_tool("planning__create_goal", {"goal": "g", "__sessionId": "acme"})
            async with server.session(gateway) as session:
                seen = await session.call_tool("planning__list_goals", {"__sessionId": "acme"})
                other = await session.call_tool("planning__list_goals", {"__sessionId": "beta/x"})
        assert "g1: g" in texts(seen)
        assert not other.is_error

    async def test_a_tenant_claim_wins_over_the_gateway_scope(self, issuer: Issuer) -> None:
        """A token naming a tenant is bound to it, whatever scopes it also has."""
        token = issuer.token(scope="mcp:gateway")
        async with serving(issuer) as server, server.session(token) as session:
            theirs = await session.call_tool("planning__list_goals", {"__sessionId": "beta"})
        assert theirs.is_error
        assert "outside tenant 'acme'" in texts(theirs)

    async def test_the_scp_claim_counts_as_scopes(self, issuer: Issuer) -> None:
        token = issuer.token(scope=OMIT, scp=["mcp:tools", "mcp:read"])
        async with serving(issuer, required_scopes=("mcp:read",)) as server:
            opened = await post_initialize(server, token)
        assert opened.status_code == 200

    async def test_static_tokens_still_work_beside_oauth(self, issuer: Issuer) -> None:
        async with serving(issuer, tokens={STATIC: None}) as server:
            static = await post_initialize(server, STATIC)
            oauth = await post_initialize(server, issuer.token())
            wrong = await post_initialize(server, STATIC[:-1])
        assert (static.status_code, oauth.status_code) == (200, 200)
        assert wrong.status_code == 401
        assert "the token is not a JWT" in wrong.json()["error"]["message"]

    async def test_a_refreshed_token_reaches_the_session_its_subject_opened(
        self, issuer: Issuer
    ) -> None:
        """The session belongs to the subject; another subject gets 404, as if unknown."""
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        async with serving(issuer) as server, server.http(None, ACCEPT) as http:
            opened = await http.post("/mcp", json=INITIALIZE, headers=_bearer(issuer.token()))
            session = {
                MCP_SESSION_ID_HEADER: opened.headers[MCP_SESSION_ID_HEADER],
                "MCP-Protocol-Version": INITIALIZE["params"]["protocolVersion"],
            }
            refreshed = issuer.token(iat=int(time.time()) + 1, jti="second")
            again = await http.post("/mcp", json=ping, headers={**session, **_bearer(refreshed)})
            bob = issuer.token(sub="bob")
            other = await http.post("/mcp", json=ping, headers={**session, **_bearer(bob)})
        assert again.status_code == 200, again.text
        assert other.status_code == 404

    async def test_metrics_read_for_an_oauth_gateway_only(self, issuer: Issuer) -> None:
        """`BearerAuth` as the SDK's TokenVerifier: a gateway's token has no tenant."""
        from actors.server.auth._principals import TENANT_CLAIM
        from actors.server.http._app import authentication

        options = ServeOptions(http=("127.0.0.1", 0), oauth=settings(issuer))
        auth = authentication(options)
        assert auth is not None
        tenant = await auth.verify_token(issuer.token())
        gateway = await auth.verify_token(issuer.token(tenant=OMIT, scope="mcp:gateway"))
        assert tenant is not None
        assert tenant.claims == {"iss": issuer.identifier, TENANT_CLAIM: "acme"}
        assert gateway is not None
        assert gateway.claims == {"iss": issuer.identifier}
        assert await auth.verify_token("nonsense") is None


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _none_token(issuer: Issuer) -> str:
    return _unsigned({"alg": "none", "kid": "rsa-1", "typ": "JWT"}, issuer.claims())


def _hs256(issuer: Issuer, secret: bytes) -> str:
    """HS256 over the issuer's own claims, keyed by `secret` (PyJWT refuses a PEM as one)."""
    header = {"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}
    unsigned = _unsigned(header, issuer.claims()).rstrip(".")
    signature = hmac.new(secret, unsigned.encode(), hashlib.sha256).digest()
    return unsigned + "." + _b64(signature)


_PUBLIC_PEM: Final = RSA_KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)

# Each refused token: how to make it, and what the refusal says.
REFUSED_TOKENS: Final[dict[str, tuple[Any, str]]] = {
    "wrong-audience": (
        lambda i: i.token(aud="https://other.example/mcp"),
        "the token is not for this server: its audience (aud) is not 'http://127.0.0.1:8765/mcp'",
    ),
    "no-audience": (lambda i: i.token(aud=OMIT), "the token has no 'aud' claim"),
    "expired": (lambda i: i.token(exp=int(time.time()) - 120), "the token has expired"),
    "not-yet-valid": (
        lambda i: i.token(nbf=int(time.time()) + 600),
        "the token is not valid yet (nbf or iat in the future)",
    ),
    "no-expiry": (lambda i: i.token(exp=OMIT), "the token has no 'exp' claim"),
    "no-subject": (lambda i: i.token(sub=OMIT), "the token has no 'sub' claim"),
    "wrong-issuer": (
        lambda i: i.token(iss="https://evil.example"),
        "the token was issued by 'https://evil.example', not by",
    ),
    "bad-signature": (
        lambda i: i.token(key=ATTACKER_KEY),
        "the token's signature does not verify",
    ),
    "tampered-claims": (
        lambda i: ".".join(
            [
                i.token().split(".")[0],
                _b64(json.dumps(i.claims(tenant="beta")).encode()),
                i.token().split(".")[2],
            ]
        ),
        "the token's signature does not verify",
    ),
    "unknown-kid": (
        lambda i: i.token(key=ATTACKER_KEY, kid="attacker-1"),
        "the token's key 'attacker-1' is not one of the issuer's keys",
    ),
    "alg-of-another-key": (
        lambda i: i.token(key=EC_KEY, kid="rsa-1", alg="ES256"),
        "the issuer's key 'rsa-1' does not verify ES256 tokens",
    ),
    "alg-none": (_none_token, "the token is signed with 'none'; this server accepts only RS256"),
    "hs256": (
        lambda i: _hs256(i, b"a shared secret of thirty-two b!"),
        "the token is signed with 'HS256'",
    ),
    "hs256-keyed-by-the-public-key": (
        lambda i: _hs256(i, _PUBLIC_PEM),
        "the token is signed with 'HS256'",
    ),
    # Signed by the issuer's key, for this server, but not access tokens (RFC 9068 §4).
    "logout-token": (
        lambda i: i.token(typ="logout+jwt"),
        "the token's type (typ 'logout+jwt') is not an access token's (at+jwt, RFC 9068)",
    ),
    "security-event": (lambda i: i.token(typ="secevent+jwt"), "(typ 'secevent+jwt') is not"),
    "dpop-proof": (lambda i: i.token(typ="DPoP+JWT"), "(typ 'DPoP+JWT') is not"),
    "typ-not-a-string": (lambda i: i.token(typ=["at+jwt"]), "(typ ['at+jwt']) is not"),
    "garbage": (lambda _i: "not-a-token-at-all", "the token is not a JWT"),
    "jwe-shaped": (lambda _i: "a.b.c.d.e", "the token is encrypted (a JWE)"),
    "bad-header": (lambda _i: "!!!.e30.sig", "the token's header cannot be read"),
    "huge": (
        lambda i: i.token(padding="x" * MAX_TOKEN_CHARACTERS),
        f"at most {MAX_TOKEN_CHARACTERS} are read",
    ),
}


class TestRefusedTokens:
    @pytest.mark.parametrize("case", REFUSED_TOKENS)
    async def test_a_bad_token_gets_401_naming_why_and_reaches_nothing(
        self, issuer: Issuer, case: str
    ) -> None:
        """401, a JSON-RPC error with the reason, the RFC 6750 challenge with RFC 9728's
        metadata URL; no session opened, no call made."""
        make, reason = REFUSED_TOKENS[case]
        token = make(issuer)
        async with serving(issuer) as server:
            refused = await post_initialize(server, token)
            calls = server.calls()
        assert refused.status_code == 401, refused.text
        message = refused.json()["error"]["message"]
        assert message.startswith("the bearer token was refused: "), message
        assert reason in message
        params = challenge(refused)
        assert params["error"] == "invalid_token"
        assert params["resource_metadata"] == METADATA_URL
        assert reason[:40].replace('"', "'") in params["error_description"]
        assert MCP_SESSION_ID_HEADER not in refused.headers
        assert calls == 0

    async def test_without_a_token_the_challenge_points_to_the_metadata(
        self, issuer: Issuer
    ) -> None:
        """No error code (RFC 6750 §3.1: none was sent), the scopes wanted, the document."""
        async with serving(issuer, required_scopes=("mcp:tools",)) as server:
            refused = await post_initialize(server, None)
            basic = await post_initialize(server, None)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == (
            f'Bearer realm="mcp", scope="mcp:tools", resource_metadata="{METADATA_URL}"'
        )
        message = refused.json()["error"]["message"]
        assert message.startswith("a valid bearer token is required")
        assert issuer.identifier in message
        assert basic.status_code == 401

    async def test_the_sdk_client_gets_the_reason(self, issuer: Issuer) -> None:
        async with serving(issuer) as server:
            with refused_by(r"the token has expired"):
                async with server.session(issuer.token(exp=int(time.time()) - 600)):
                    pass

    @pytest.mark.parametrize(
        ("claims", "reason", "scope"),
        [
            (
                {"tenant": OMIT},
                "the token names no tenant (claim 'tenant') and is no gateway's "
                "(scope 'mcp:gateway')",
                "mcp:gateway",
            ),
            (
                {"tenant": "not a tenant!"},
                "the token's claim 'tenant' is not a tenant name",
                None,
            ),
            ({"tenant": 42}, "the token's claim 'tenant' is not a tenant name", None),
            (
                {"scope": "mcp:gateway"},
                "the token lacks the scope(s) mcp:tools this server requires",
                "mcp:tools",
            ),
        ],
    )
    async def test_a_good_token_without_what_is_required_gets_403(
        self, issuer: Issuer, claims: dict[str, Any], reason: str, scope: str | None
    ) -> None:
        async with serving(issuer, required_scopes=("mcp:tools",)) as server:
            refused = await post_initialize(server, issuer.token(**claims))
            calls = server.calls()
        assert refused.status_code == 403, refused.text
        assert reason in refused.json()["error"]["message"]
        params = challenge(refused)
        assert params["error"] == "insufficient_scope"
        assert params.get("scope", "mcp:tools") == (scope or "mcp:tools")
        assert calls == 0

    async def test_without_a_gateway_scope_a_token_must_name_its_tenant(
        self, issuer: Issuer
    ) -> None:
        async with serving(issuer, gateway_scope=None) as server:
            refused = await post_initialize(server, issuer.token(tenant=OMIT, scope="mcp:gateway"))
        assert refused.status_code == 403
        assert "the token names no tenant: this server needs its claim 'tenant'" in refused.text

    async def test_gateways_only_without_a_tenant_claim(self, issuer: Issuer) -> None:
        """No tenant claim configured: only gateway tokens; a tenant claim binds nothing."""
        async with serving(issuer, tenant_claim=None) as server:
            tenant = await post_initialize(server, issuer.token())
            gateway = await post_initialize(server, issuer.token(scope="mcp:gateway"))
        assert tenant.status_code == 403
        assert "takes gateway tokens only" in tenant.text
        assert gateway.status_code == 200


# ---- the metadata document ----------------------------------------------------------------


class TestMetadata:
    @pytest.mark.parametrize(
        "path",
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ],
    )
    async def test_the_document_names_the_resource_and_its_issuer(
        self, issuer: Issuer, path: str
    ) -> None:
        """RFC 9728, served without a token, at the endpoint's path and at the root."""
        async with serving(issuer, required_scopes=("mcp:tools",)) as server:
            async with server.http() as http:
                document = await http.get(path)
                posted = await http.post(path, json={})
        assert document.status_code == 200
        assert document.json() == {
            "resource": RESOURCE,
            "authorization_servers": [issuer.identifier],
            "scopes_supported": ["mcp:tools"],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-actors",
        }
        assert posted.status_code == 405

    async def test_a_resource_under_another_path_is_served_there_too(self, issuer: Issuer) -> None:
        """A proxy that serves /mcp as /api/mcp: the document's path follows the resource."""
        resource = "https://mcp.example.com/api/mcp"
        async with serving(issuer, resource=resource) as server, server.http() as http:
            document = await http.get("/.well-known/oauth-protected-resource/api/mcp")
            refused = await http.post("/mcp", json=INITIALIZE, headers=ACCEPT)
        assert document.json()["resource"] == resource
        assert challenge(refused)["resource_metadata"] == (
            "https://mcp.example.com/.well-known/oauth-protected-resource/api/mcp"
        )


# ---- the issuer's keys ----------------------------------------------------------------------


class TestIssuerKeys:
    async def test_keys_are_discovered_fetched_once_and_cached(self, issuer: Issuer) -> None:
        async with serving(issuer) as server:
            for _ in range(3):
                assert (await post_initialize(server, issuer.token())).status_code == 200
        assert issuer.metadata_requests == ["/.well-known/oauth-authorization-server"]
        assert issuer.jwks_requests == 1

    async def test_an_issuer_with_a_path_is_found_by_openid_configuration(self) -> None:
        """RFC 8414's address first, then OpenID Connect's two."""
        async with running(Issuer(path="/realms/acme", metadata="openid")) as issuer:
            async with serving(issuer) as server:
                opened = await post_initialize(server, issuer.token())
        assert opened.status_code == 200, opened.text
        assert issuer.metadata_requests == [
            "/.well-known/oauth-authorization-server/realms/acme",
            "/.well-known/openid-configuration/realms/acme",
            "/realms/acme/.well-known/openid-configuration",
        ]

    async def test_metadata_of_another_issuer_is_not_believed(self) -> None:
        async with running(Issuer(metadata="foreign")) as issuer:
            async with serving(issuer) as server:
                refused = await post_initialize(server, issuer.token())
        assert refused.status_code == 503
        assert "is for issuer 'https://evil.example'" in refused.json()["error"]["message"]
        assert issuer.jwks_requests == 0

    async def test_a_configured_jwks_url_skips_discovery(self, issuer: Issuer) -> None:
        async with serving(issuer, jwks_url=issuer.url + "/jwks") as server:
            opened = await post_initialize(server, issuer.token())
        assert opened.status_code == 200
        assert issuer.metadata_requests == []

    async def test_a_flood_of_unknown_kids_fetches_the_keys_once_per_interval(
        self, issuer: Issuer, mock_clock: trio.testing.MockClock
    ) -> None:
        """Within the interval after a fetch, made-up kids are refused without asking the
        issuer; past it, fifty at once cause one fetch between them, then none again."""
        statuses: list[int] = []
        async with serving(issuer) as server:
            assert (await post_initialize(server, issuer.token())).status_code == 200

            async def one(number: int) -> None:
                token = issuer.token(key=ATTACKER_KEY, kid=f"random-{number}")
                statuses.append((await post_initialize(server, token)).status_code)

            for number in range(10):
                await one(number)
            within = issuer.jwks_requests
            mock_clock.jump(10.0)
            async with trio.open_nursery() as nursery:
                for number in range(10, 60):
                    nursery.start_soon(one, number)
            after = issuer.jwks_requests
            for number in range(60, 70):
                await one(number)
        assert statuses == [401] * 70
        assert (within, after, issuer.jwks_requests) == (1, 2, 2)

    async def test_a_rotated_key_is_fetched_once_the_interval_has_passed(
        self, issuer: Issuer, mock_clock: trio.testing.MockClock
    ) -> None:
        """The issuer adds a key: refused while a fetch is not due, accepted after."""
        async with serving(issuer) as server:
            assert (await post_initialize(server, issuer.token())).status_code == 200
            issuer.keys.append(_jwk(ROTATED_KEY, "rsa-2", "RS256"))
            rotated = issuer.token(key=ROTATED_KEY, kid="rsa-2")
            mock_clock.jump(1.0)  # within the 10 s interval
            early = await post_initialize(server, rotated)
            mock_clock.jump(10.0)
            later = await post_initialize(server, rotated)
        assert early.status_code == 401
        assert later.status_code == 200
        assert issuer.jwks_requests == 2

    async def test_keys_removed_by_the_issuer_stop_working_after_max_age(
        self, issuer: Issuer, mock_clock: trio.testing.MockClock
    ) -> None:
        async with serving(issuer) as server:
            assert (await post_initialize(server, issuer.token())).status_code == 200
            issuer.keys = [key for key in issuer.keys if key["kid"] != "rsa-1"]
            mock_clock.jump(601.0)
            removed = await post_initialize(server, issuer.token())
        assert removed.status_code == 401
        assert "not one of the issuer's keys" in removed.text

    async def test_an_issuer_that_is_down_gets_503_quickly_and_static_tokens_go_on(self) -> None:
        """Connection refused: 503 with Retry-After, then 503 without asking again."""
        issuer = Issuer(url=f"http://127.0.0.1:{_free_port()}")
        async with serving(issuer, tokens={STATIC: None}) as server:
            with trio.fail_after(10):
                first = await post_initialize(server, issuer.token())
                second = await post_initialize(server, issuer.token())
            static = await post_initialize(server, STATIC)
        for refused in (first, second):
            assert refused.status_code == 503
            assert int(refused.headers["retry-after"]) >= 1
            message = refused.json()["error"]["message"]
            assert message.startswith("the bearer token cannot be checked now: ")
        assert "ConnectError" in first.json()["error"]["message"]
        assert static.status_code == 200

    async def test_a_slow_jwks_is_given_up_on_and_shared_by_waiting_requests(
        self, issuer: Issuer
    ) -> None:
        """An endpoint that never answers: every request waiting on the one fetch gets 503
        when its deadline passes; the issuer was asked once."""
        issuer.jwks = "slow"
        statuses: list[int] = []
        # Long enough for the fetch to reach the issuer on a loaded machine (at 0.5 s it
        # once gave up before connecting: asked 0 times).
        async with serving(issuer, jwks_timeout=2.0) as server:

            async def one() -> None:
                statuses.append((await post_initialize(server, issuer.token())).status_code)

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for _ in range(5):
                        nursery.start_soon(one)
        assert statuses == [503] * 5
        assert issuer.jwks_requests == 1

    async def test_a_client_that_leaves_mid_fetch_does_not_waste_it(self, issuer: Issuer) -> None:
        """The request that started the fetch is cancelled; the fetch goes on, and the next
        request (within the interval, so it starts none) gets the keys."""
        issuer.jwks = "slow"
        async with serving(issuer) as server:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(post_initialize, server, issuer.token())
                await issuer.jwks_asked.wait()
                nursery.cancel_scope.cancel()
                issuer.release.set()  # the issuer answers only once the client has left
            later = await post_initialize(server, issuer.token())
        assert later.status_code == 200, later.text
        assert issuer.jwks_requests == 1

    @pytest.mark.parametrize(
        ("mode", "reason"),
        [
            ("huge", "sent more than 262144 bytes"),
            ("gzip", "sent a 'gzip'-encoded body; only identity is read"),
            ("error", "answered HTTP 500"),
        ],
    )
    async def test_a_misbehaving_jwks_endpoint_gets_503_naming_it(
        self, issuer: Issuer, mode: str, reason: str
    ) -> None:
        issuer.jwks = mode
        async with serving(issuer) as server:
            refused = await post_initialize(server, issuer.token())
        assert refused.status_code == 503
        assert reason in refused.json()["error"]["message"]

    async def test_a_failed_refetch_keeps_the_keys_it_had(
        self, issuer: Issuer, mock_clock: trio.testing.MockClock
    ) -> None:
        async with serving(issuer) as server:
            assert (await post_initialize(server, issuer.token())).status_code == 200
            issuer.jwks = "error"
            mock_clock.jump(601.0)
            still = await post_initialize(server, issuer.token())
        assert still.status_code == 200
        assert issuer.jwks_requests == 2

    # Signing with the short key is the point: PyJWT's warning about it is expected.
    @pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
    async def test_a_short_rsa_key_is_never_used(
        self, issuer: Issuer, caplog: pytest.LogCaptureFixture
    ) -> None:
        weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        issuer.keys.append(_jwk(weak, "weak-1", "RS256"))
        async with serving(issuer) as server:
            refused = await post_initialize(server, issuer.token(key=weak, kid="weak-1"))
        assert refused.status_code == 401
        assert "'weak-1' is not one of the issuer's keys" in refused.text
        warned = "key 'weak-1' is a 1024-bit RSA key, too short to trust"
        assert any(warned in record.getMessage() for record in caplog.records)

    async def test_symmetric_and_private_keys_are_never_used(
        self, issuer: Issuer, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An ``oct`` key, and an RSA key published with its private half: both ignored."""
        secret = b"a shared secret of thirty-two b!"
        private = RSAAlgorithm.to_jwk(ATTACKER_KEY, as_dict=True)
        issuer.keys += [
            {"kty": "oct", "k": _b64(secret), "kid": "hmac-1", "alg": "HS256"},
            {**private, "kid": "leaked-1", "alg": "RS256"},
        ]
        async with serving(issuer) as server:
            hs = await post_initialize(server, _hs256(issuer, secret))
            leaked = await post_initialize(server, issuer.token(key=ATTACKER_KEY, kid="leaked-1"))
            good = await post_initialize(server, issuer.token())
        assert hs.status_code == 401
        assert "signed with 'HS256'" in hs.text
        assert leaked.status_code == 401
        assert "'leaked-1' is not one of the issuer's keys" in leaked.text
        assert good.status_code == 200
        assert any(
            "publishes key 'leaked-1' with private parameters" in r.getMessage()
            for r in caplog.records
        )


# ---- a real server --------------------------------------------------------------------------


def _script_server(issuer: Issuer) -> tuple[str, ...]:
    """docs_src/serving/serve_oauth.py's options, on a free port and in memory."""
    script = (
        "import sys, attrs; "
        f"sys.path.insert(0, {str(ROOT)!r}); "
        "from actors.server import configure_logging, run; "
        "configure_logging('info'); "
        "from docs_src.serving.serve_oauth import options; "
        f"run(attrs.evolve(options({issuer.identifier!r}), http=('127.0.0.1', 0), "
        "state='memory'))"
    )
    return (sys.executable, "-c", script)


@pytest.mark.parametrize("how", ["command line", "script"])
async def test_a_real_server_serves_the_docs_client_and_survives_huge_headers(
    issuer: Issuer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """``mcp-actors serve --oauth-…`` (some options from MCP_ACTORS_… variables), or the
    docs' script: the docs' client (guides/oauth.md) sees the challenge, the metadata, its
    tenant's state, and the refusal of another tenant's session; the log says how OAuth is
    set up; tokens too long for the gate, or for the server's head limit, leave it serving."""
    from docs_src.serving import oauth_client

    if how == "command line":
        monkeypatch.setenv("MCP_ACTORS_OAUTH_TENANT_CLAIM", "tenant")
        monkeypatch.setenv("MCP_ACTORS_OAUTH_REQUIRED_SCOPE", "mcp:tools")
        args = ["--state", "memory", "--oauth-issuer", issuer.identifier]
        started = http_server(*args, "--oauth-resource", RESOURCE)
    else:
        started = http_server(command=_script_server(issuer))
    async with started as server:
        with trio.fail_after(60):
            await oauth_client.main(server.url, issuer.token())
            async with httpx2.AsyncClient(timeout=30) as http:
                long = await http.post(server.url, json=INITIALIZE, headers=_bearer("x" * 9000))
                huge = await http.post(server.url, json=INITIALIZE, headers=_bearer("x" * 200_000))
                document = await http.get(server.url.removesuffix("/mcp") + DOCUMENT_PATH)
        log = server.log.text()
    printed = capsys.readouterr().out.replace(issuer.identifier, "https://auth.example.com")
    assert printed == (
        '401 Bearer realm="mcp", scope="mcp:tools", resource_metadata='
        '"http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"\n'
        "resource: http://127.0.0.1:8765/mcp\n"
        "authorization server: https://auth.example.com\n"
        "acme/roadmap: Goals (1):\n"
        "- g1: Ship\n"
        "True session 'beta/plans' is outside tenant 'acme' of this token; "
        "name a session 'acme' or 'acme/…'\n"
    )
    assert long.status_code == 401
    assert "at most 8192 are read" in long.json()["error"]["message"]
    assert huge.status_code == 431  # our server's head limit, the client told before the close
    assert document.status_code == 200
    assert f"oauth: issuer {issuer.identifier}, audience '{RESOURCE}'" in log
    assert "tenant claim 'tenant', no gateways, required scopes mcp:tools" in log
    assert "oauth: 3 signing key(s) from " in log
    assert "caller=oauth:acme/alice tenant='acme'" in log
    assert "Traceback" not in log
    assert issuer.jwks_requests == 1
