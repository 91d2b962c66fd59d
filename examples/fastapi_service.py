"""A FastAPI service embedding the runtime: each conversation's goals, kept apart.

Run it from the project root with ``uvicorn examples.fastapi_service:app --port 8080``
(``pip install -e '.[examples]'``): 8080, not uvicorn's default 8000, which ``mkdocs
serve`` takes too. ``MCP_ACTORS_STATE`` names the state store
(``memory`` by default; ``sqlite:///state.db`` keeps goals across restarts).
The same tools, on the same state, are served to MCP clients at ``/mcp``;
``MCP_ACTORS_TOKENS`` names a tokens file, as ``serve --tokens-file`` reads.
Behind a proxy or a client that pools connections, give uvicorn a
``--timeout-keep-alive`` longer than their idle timeout (uvicorn's is 5 s,
httpx's too): the side that closes an idle connection must be the client,
or a request sent as the server closes it is reset.
"""

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from actors import ArgumentsError, AsyncioRuntime, RuntimeCallError, open_asyncio_runtime
from actors.modules import planning
from actors.server import McpEndpoint, ServeOptions, read_tokens
from protocol import CallResult, ProtocolError

log = logging.getLogger("uvicorn.error")  # uvicorn's server log: shown with no set-up
PORT = 8080  # the port the run line above gives uvicorn


tokens_file = os.environ.get("MCP_ACTORS_TOKENS")
tokens = dict(read_tokens(Path(tokens_file))) if tokens_file else {}
# serve --http's rules: bearer tokens, tenants, Origin and Host checks, limits.
mcp = McpEndpoint(ServeOptions(http=("127.0.0.1", PORT), tokens=tokens))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    state = os.environ.get("MCP_ACTORS_STATE", "memory")
    # Trio runs on uvicorn's asyncio loop for as long as the app is up; leaving
    # the block lets accepted calls finish and stops every actor.
    async with (
        open_asyncio_runtime([planning], state=state) as runtime,
        mcp.serving(runtime),
    ):
        app.state.runtime = runtime
        yield
    stats = runtime.statistics()
    log.info("runtime stopped: %d calls, %d live actors", stats.calls, stats.live_actors)


app = FastAPI(lifespan=lifespan)


def get_runtime(request: Request) -> AsyncioRuntime:
    runtime: AsyncioRuntime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[AsyncioRuntime, Depends(get_runtime)]


class NewGoal(BaseModel):
    # Unknown fields are refused, not ignored: a stray "__sessionId" is a mistake to report.
    model_config = ConfigDict(extra="forbid")
    goal: str = Field(min_length=1, max_length=1000)


def reply(result: CallResult) -> dict[str, Any]:
    if result.is_error:  # the tool refused the call; its text says why
        raise HTTPException(status_code=422, detail=result.first_text)
    return {"text": result.first_text, "data": result.structured_content}


@app.post("/sessions/{session_id}/goals")
async def create_goal(session_id: str, body: NewGoal, runtime: RuntimeDep) -> dict[str, Any]:
    # The session comes from the URL, never from the body. Anyone who knows an id
    # can use it: a real service derives it from the authenticated user.
    meta = {"sessionId": session_id}
    return reply(await runtime.call_tool("planning__create_goal", {"goal": body.goal}, meta=meta))


@app.get("/sessions/{session_id}/goals")
async def list_goals(session_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    meta = {"sessionId": session_id}
    return reply(await runtime.call_tool("planning__list_goals", meta=meta))


@app.exception_handler(ProtocolError)  # a bad session id: too long, control characters
@app.exception_handler(ArgumentsError)  # arguments that fail the tool's schema
async def bad_input(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=422)


@app.exception_handler(RuntimeCallError)  # at capacity, shutting down, timed out, crashed
async def unavailable(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=503)


app.mount("/", mcp)  # MCP at /mcp; last, so that the routes above come first
