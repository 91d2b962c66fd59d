"""The first ASGI layer of every HTTP listener: ``Host``, ``Origin`` and forwarded headers.

Every path goes through it (``/mcp`` and the operator's ``/healthz``,
``/readyz`` and ``/metrics`` alike), before a token is looked at:

* **Host** (421). A server bound to loopback answers only to loopback names
  (``localhost``, ``127.0.0.1``, ``[::1]``, any port) and to the names the
  operator adds (``--allow-host``): a web page whose DNS name an attacker
  points at 127.0.0.1 sends its own name, and is refused (DNS rebinding). A
  reverse proxy that passes the public name on needs that name allowed, and
  so does nginx's default when ``proxy_pass`` names an ``upstream`` block (it
  sends the block's name); ``proxy_pass http://127.0.0.1:PORT`` needs nothing. A public
  bind cannot know its names in advance and checks only the operator's, if any.
* **Origin** (403). A browser's request is served only from a loopback
  origin or one the operator allows (``--allow-origin``).
* **Forwarded headers.** ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are
  believed only when the request comes from an address the operator lists
  (``--trusted-proxy``); the client address is then the nearest one in the
  chain that is not such a proxy. From anyone else they are ignored, so a
  client cannot make the logs name someone else.

Refusals go to the listener's `RefusalLog`: bounded, escaped, rate-limited.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Final, final

import attrs
from starlette.datastructures import Headers

from .._addresses import LOOPBACK_NAMES, is_loopback
from ._responses import answer_early, error_response

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from starlette.types import ASGIApp, Receive, Scope, Send

    from ._responses import RefusalLog

__all__ = ["Front", "FrontRefusal", "FrontRules"]

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _host_part(host: str) -> str:
    """`host` without its port: ``[::1]:80`` → ``[::1]``, ``example.com:80`` → ``example.com``."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rpartition(":")[0] if ":" in host else host


def _networks(addresses: Iterable[str]) -> tuple[_Network, ...]:
    return tuple(ipaddress.ip_network(address, strict=False) for address in addresses)


def _within(address: str, networks: tuple[_Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False
    return any(ip in network for network in networks)


@final
@attrs.frozen
class FrontRefusal:
    """Why `FrontRules` refuses a request, and what the answer says."""

    status: int
    """421 (Host) or 403 (Origin)."""
    message: str
    """The JSON-RPC error's message: what is wrong and what the operator can do."""
    kind: str
    """How `RefusalLog` counts it."""
    detail: str
    """The header as the client sent it, for the log."""


@final
class FrontRules:
    """The checks of this module's docstring, as plain functions of the headers.

    `Front` applies them to every ASGI request; the wire's fast handler
    (`actors.server.http._app`) to the requests it answers without ASGI.
    """

    def __init__(
        self,
        *,
        bind_host: str,
        allow_hosts: Iterable[str],
        origin_allowed: Callable[[str], bool],
        trusted_proxies: Iterable[str],
    ) -> None:
        self._check_host = is_loopback(bind_host) or bool(tuple(allow_hosts))
        self._loopback_bind = is_loopback(bind_host)
        self._allowed_hosts: Final = frozenset(host.lower() for host in allow_hosts)
        self._origin_allowed = origin_allowed
        self.proxies: Final = _networks(trusted_proxies)
        """The operator's proxies, whose forwarded headers are believed."""

    def refusal(self, headers: Headers) -> FrontRefusal | None:
        """Why a request with `headers` is refused (Host, then Origin); None: it is not."""
        host = headers.get("host", "")
        if self._check_host and not self._host_allowed(host.lower()):
            kind = "a request for a Host this server does not serve"
            return FrontRefusal(421, self._wrong_host(host), kind, host)
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin):
            message = (
                f"origin {_shown(origin)} is not allowed; loopback origins are, "
                "and the operator can allow others with --allow-origin"
            )
            return FrontRefusal(403, message, "a request from a foreign origin", origin)
        return None

    def _host_allowed(self, host: str) -> bool:
        if host in self._allowed_hosts or _host_part(host) in self._allowed_hosts:
            return True
        return self._loopback_bind and _host_part(host) in LOOPBACK_NAMES

    def _wrong_host(self, host: str) -> str:
        if not host:
            return "the request has no Host header; this server needs one"
        served = "loopback names" if self._loopback_bind else "the names it was given"
        return (
            f"Host {_shown(host)} is not served here: this server answers only to {served} "
            "(protection against DNS rebinding); if a reverse proxy in front of it passes this "
            f"name on, the operator adds --allow-host {_shown(_host_part(host.lower()))}"
        )


@final
class Front:
    """ASGI middleware: the checks of `FrontRules` (this module's docstring), then `app`."""

    def __init__(self, app: ASGIApp, rules: FrontRules, refusals: RefusalLog) -> None:
        self._app = app
        self._rules = rules
        self._refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan events go straight through
            await self._app(scope, receive, send)
            return
        if self._rules.proxies:
            _believe_forwarded(scope, self._rules.proxies)
        refusal = self._rules.refusal(Headers(scope=scope))
        if refusal is not None:
            self._refusals.refused(refusal.kind, refusal.detail, scope)
            answer = error_response(refusal.status, refusal.message)
            await answer_early(answer, scope, receive, send)
            return
        await self._app(scope, receive, send)


_SHOWN_CHARACTERS: Final = 100


def _shown(text: str) -> str:
    """A client's header value as an error may quote it: printable, short, quoted."""
    cut = "…" if len(text) > _SHOWN_CHARACTERS else ""
    return repr(text[:_SHOWN_CHARACTERS] + cut)


def _believe_forwarded(scope: Scope, proxies: tuple[_Network, ...]) -> None:
    """Take the client address and scheme from the forwarded headers of a trusted proxy."""
    client = scope.get("client")
    if not client or not _within(str(client[0]), proxies):
        return
    headers = Headers(scope=scope)
    chain = [hop.strip() for hop in headers.get("x-forwarded-for", "").split(",") if hop.strip()]
    # The nearest hop that is not one of the operator's proxies is the client;
    # anything further left was written by that client and proves nothing.
    for hop in reversed(chain):
        if not _within(hop, proxies):
            scope["client"] = (hop, 0) if _is_address(hop) else client
            break
    proto = headers.get("x-forwarded-proto", "").strip().lower()
    if proto in ("http", "https"):
        scope["scheme"] = proto


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True
