"""A FastAPI service that calls tools from its routes and serves them over MCP at /mcp.

Run it with: uvicorn embed_fastapi:app --port 8080 (pip install 'mcp-actors[examples]')
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel

from actors import AsyncioRuntime, open_asyncio_runtime
from actors.modules import planning
from actors.server import McpEndpoint, ServeOptions
from protocol import CallResult

# serve --http's rules (tokens, tenants, Origin and Host checks, limits), at /mcp.
mcp = McpEndpoint(ServeOptions(http=("127.0.0.1", 8080)))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # In memory unless told: MCP_ACTORS_STATE=sqlite:///state.db keeps the goals.
    state = os.environ.get("MCP_ACTORS_STATE", "memory")
    async with (
        open_asyncio_runtime([planning], state=state) as runtime,
        mcp.serving(runtime),
    ):
        app.state.runtime = runtime
        yield  # leaving: MCP stops taking calls, accepted calls finish, actors stop


app = FastAPI(lifespan=lifespan)


def get_runtime(request: Request) -> AsyncioRuntime:
    runtime: AsyncioRuntime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[AsyncioRuntime, Depends(get_runtime)]


class NewGoal(BaseModel):
    goal: str


def reply(result: CallResult) -> dict[str, Any]:
    if result.is_error:
        raise HTTPException(status_code=422, detail=result.first_text)
    return {"text": result.first_text, "data": result.structured_content}


@app.post("/sessions/{session_id}/goals")
async def create_goal(
    session_id: str,
    body: NewGoal,
    runtime: RuntimeDep,
) -> dict[str, Any]:
    # The session comes from the URL here; a real service takes the signed-in user's.
    meta = {"sessionId": session_id}
    goal = {"goal": body.goal}
    return reply(await runtime.call_tool("planning__create_goal", goal, meta=meta))


@app.get("/sessions/{session_id}/goals")
async def list_goals(session_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    meta = {"sessionId": session_id}
    return reply(await runtime.call_tool("planning__list_goals", meta=meta))


app.mount("/", mcp)  # MCP at /mcp; mounted last, so that the routes above come first
