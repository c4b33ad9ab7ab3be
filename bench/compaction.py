"""Prompt tokens sent for a long, tool-heavy task, with context compaction on and off.

The scripted model server asks for ``TURNS`` tool calls, each returning a large
result, then answers; it reports prompt tokens the way providers count them
(roughly, characters / 4 of what it was sent). The answer must be the same both
ways, or the comparison does not count.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentloop.chat import AgentSetup, ChatContext, collect  # noqa: E402
from agentloop.config import AgentConfig  # noqa: E402
from agentloop.models import ChatRequest, UserMessage  # noqa: E402
from agentloop.tools.registry import ToolRegistry  # noqa: E402
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call  # noqa: E402
from tests.sample_tools import big  # noqa: E402

TURNS = 12
RESULT_CHARS = 6_000
RUNS = 5


@dataclass
class Outcome:
    prompt_tokens: int
    answer: str
    requests: int


def respond(req: RecordedRequest) -> Reply:
    done = sum(1 for m in req.messages if m["role"] == "tool")
    if done < TURNS:
        return Reply(tool_calls=[call("big", n=RESULT_CHARS + done)])
    return Reply(text=f"Read {done} documents.")


async def run_once(compaction: bool) -> Outcome:
    config = AgentConfig(
        compaction=compaction,
        max_iterations=TURNS + 2,
        tool_result_max_chars=RESULT_CHARS + 200,
        deadline_reserve_s=0,
    )
    context = ChatContext(setup=AgentSetup(config=config, tools=ToolRegistry([big])))
    request = ChatRequest(
        messages=[UserMessage(content="Read every document.")],
        model="groq:llama-3.3-70b-versatile",
        tools=["big"],
        token_budget=1_000_000,
    )
    _, done = await collect(request, context)
    return Outcome(done.usage.prompt_tokens, done.text, done.iterations)


def main() -> int:
    with ScriptedLLM() as llm:
        os.environ.update(GROQ_BASE_URL=llm.groq_base_url, GROQ_API_KEY="bench-key")
        llm.respond_with(respond)
        results: dict[bool, list[Outcome]] = {True: [], False: []}
        for _ in range(RUNS):
            for compaction in (False, True):
                results[compaction].append(asyncio.run(run_once(compaction)))
    off, on = results[False], results[True]
    answers = {o.answer for o in off + on}
    print(f"\nPrompt tokens for a {TURNS}-turn task with {RESULT_CHARS}-character tool results")
    print(f"(median of {RUNS} runs; answers identical: {len(answers) == 1})\n")
    print(f"{'context':<22}{'prompt tokens':>15}{'model calls':>13}{'ratio':>8}")
    base = statistics.median(o.prompt_tokens for o in off)
    for label, outcomes in (("full history", off), ("compacted (default)", on)):
        tokens = statistics.median(o.prompt_tokens for o in outcomes)
        print(f"{label:<22}{tokens:>15,.0f}{outcomes[0].requests:>13}{tokens / base:>8.2f}")
    return 0 if len(answers) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
