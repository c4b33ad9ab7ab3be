"""A call the provider reports no usage for is charged by the run's one token estimate."""

from __future__ import annotations

from agentloop.events import TextDelta, TextReset, TurnStart
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.helpers import run_chat
from tests.sample_tools import echo


async def test_a_cut_calls_output_is_estimated_by_the_calibrated_ratio(
    llm: ScriptedLLM, model: str
) -> None:
    llm.script(
        # One prompt token for a prompt of hundreds of characters: the ratio's floor, 0.05.
        Reply(tool_calls=[call("echo", text="hi")], usage=(1, 1)),
        Reply(text="The first words arrive and then the line drops.", cut_after=6),
        Reply(text="The whole answer.", usage=(1, 1)),
    )

    result = await run_chat("Hi", model=model, tools=[echo])

    assert result.done.text == "The whole answer."
    second = result.events.index(result.of(TurnStart)[1])
    reset = result.events.index(result.of(TextReset)[0])
    partial = "".join(e.text for e in result.events[second:reset] if isinstance(e, TextDelta))
    assert len(partial) >= 8  # the estimate below is then below the old characters // 4
    estimate = int(len(partial) * 0.05) + 1
    assert result.done.usage.completion_tokens == 1 + estimate + 1
