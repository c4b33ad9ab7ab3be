"""The floor for the chat app's cold start: the least web app that streams a Groq run.

uvicorn + Starlette, ``GET /healthz`` and ``POST /chat`` answering SSE (``text_delta`` frames,
then ``done``) from the hand-written loop in ``bench/floor_groq.py``; like the chat app, it
imports the SDK and makes its client on the first request. No auth, validation, limits,
events, tools registry or logging: what the chat app's start-up and first answer cost on
top of this is agentloop's.

``uvicorn bench.floor_app:app``, with ``GROQ_BASE_URL`` and ``GROQ_API_KEY`` set.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench import tasks

_client: list[Any] = []


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def chat(request: Request) -> Response:
    from bench import floor_groq

    if not _client:
        _client.append(floor_groq.client(os.environ["GROQ_BASE_URL"], os.environ["GROQ_API_KEY"]))
    body = await request.json()
    names = body.get("tools") or []
    tools = [t for task in tasks.TOOL_NAMES for t in tasks.openai_tool_definitions(task)]
    tools = [t for t in tools if t["function"]["name"] in names]  # type: ignore[index]
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def produce() -> None:
        try:
            text = await floor_groq.run(
                _client[0],
                "llama-3.3-70b-versatile",
                [{"role": "system", "content": tasks.SYSTEM_PROMPT}, *body["messages"]],
                tools,
                tasks.ASYNC_TOOLS,
                lambda delta: queue.put_nowait(frame("text_delta", {"text": delta})),
            )
            queue.put_nowait(frame("done", {"type": "done", "text": text}))
        finally:
            queue.put_nowait(None)

    async def frames() -> AsyncIterator[str]:
        task = asyncio.create_task(produce())
        while (item := await queue.get()) is not None:
            yield item
        await task

    return StreamingResponse(frames(), media_type="text/event-stream")


def frame(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


app = Starlette(
    routes=[
        Route("/healthz", healthz, methods=["GET"]),
        Route("/chat", chat, methods=["POST"]),
    ]
)
