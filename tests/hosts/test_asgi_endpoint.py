"""`McpEndpoint` on its own: refusals outside its lifespan, and bad options."""

from __future__ import annotations

import asyncio

import httpx2
import pytest

from actors import open_asyncio_runtime
from actors.modules import planning
from actors.server import ConfigurationError, McpEndpoint, ServeOptions

LOCAL = ServeOptions(http=("127.0.0.1", 8000))


def test_it_needs_the_host_it_is_served_on() -> None:
    with pytest.raises(ValueError, match=r"needs options\.http"):
        McpEndpoint(ServeOptions())


def test_its_options_are_checked_as_serves_are() -> None:
    """A public host without tokens is refused, as ``serve --http 0.0.0.0:…`` is."""
    with pytest.raises(ConfigurationError, match="without tokens"):
        McpEndpoint(ServeOptions(http=("0.0.0.0", 8000)))


def test_outside_its_serving_block_it_answers_503() -> None:
    endpoint = McpEndpoint(LOCAL)

    async def scenario() -> tuple[int, str]:
        transport = httpx2.ASGITransport(app=endpoint)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            response = await http.post("/mcp", json={})
        return response.status_code, response.text

    status, text = asyncio.run(scenario())
    assert status == 503
    assert "endpoint.serving(runtime)" in text


def test_it_serves_one_runtime_at_a_time() -> None:
    endpoint = McpEndpoint(LOCAL)

    async def scenario() -> None:
        async with open_asyncio_runtime([planning]) as runtime, endpoint.serving(runtime):
            with pytest.raises(RuntimeError, match="already serving"):
                async with endpoint.serving(runtime):
                    pass

    asyncio.run(scenario())
