"""The ``mcp`` SDK's own client, connected to the served app's ``/mcp`` (the MCP face)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.served import TOKEN


@asynccontextmanager
async def open_mcp_session(
    url: str, token: str = TOKEN, statuses: list[int] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized session with the app at ``url``; each response's status appended to
    ``statuses`` when given (what the SDK does not surface)."""

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    client = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {token}"},
        timeout=30,
        event_hooks={"response": [record]},
    )
    async with (
        client,
        streamable_http_client(f"{url}/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
