"""The floor on the bare ``groq`` async SDK: what any agent loop on it must do, no more.

The same loop as ``floor_openai.py``; Groq's SDK takes no ``stream_options`` (usage comes in
``x_groq`` on the last chunk). Stream a chat completion, pass text on as it arrives, assemble
tool calls by ``index``, run the calls concurrently with ``asyncio.gather``, append the
results, repeat. No
validation, limits, retries, events or error handling: the cost every real loop pays on
top of this is what the benchmark calls overhead.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from groq import AsyncGroq

ToolFn = Callable[..., Awaitable[str]]


def client(base_url: str, api_key: str) -> AsyncGroq:
    return AsyncGroq(base_url=base_url, api_key=api_key, max_retries=0)


async def run(
    client: AsyncGroq,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    functions: dict[str, ToolFn],
    on_text: Callable[[str], None] | None = None,
    max_turns: int = 25,
) -> str:
    messages = list(messages)
    for _ in range(max_turns):
        stream = await client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            tools=tools or None,  # type: ignore[arg-type]
            stream=True,
        )
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        async for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    if on_text is not None:
                        on_text(delta.content)
                for part in delta.tool_calls or ():
                    call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = call["id"] or part.id or ""
                    if part.function is not None:
                        call["name"] = call["name"] or part.function.name or ""
                        call["arguments"] += part.function.arguments or ""
        if not calls:
            return "".join(text)
        ordered = [calls[i] for i in sorted(calls)]
        messages.append(
            {
                "role": "assistant",
                "content": "".join(text) or None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {k: c[k] for k in ("name", "arguments")},
                    }
                    for c in ordered
                ],
            }
        )
        results = await asyncio.gather(
            *(functions[c["name"]](**json.loads(c["arguments"] or "{}")) for c in ordered)
        )
        messages += [
            {"role": "tool", "tool_call_id": c["id"], "content": str(result)}
            for c, result in zip(ordered, results, strict=True)
        ]
    raise RuntimeError(f"no answer after {max_turns} turns")
