"""ShownAnswer keeps the answer by the client's own rule, so done.text can be read from it."""

from __future__ import annotations

from agentloop.answer import ShownAnswer
from agentloop.events import Event, TextReset, ToolCallResult, TurnStart
from tests.helpers import client_answer


def result(call_id: str) -> ToolCallResult:
    return ToolCallResult(call_id=call_id, name="echo", ok=True, duration_ms=1.0, content="{}")


def test_the_answer_is_what_a_client_shows_after_every_kind_of_event() -> None:
    events: list[Event] = []
    answer = ShownAnswer(events.append)  # type: ignore[arg-type]  # every event is an Event

    answer.restart(TurnStart(iteration=1, budget_remaining=100))
    answer.add("Let me ")
    answer.add("look.")
    assert answer.text == "Let me look." == client_answer(events)

    answer.restart(result("call_1"))  # a client starts its answer again after a result
    assert answer.text == "" == client_answer(events)

    answer.restart(TurnStart(iteration=2, budget_remaining=90))
    answer.add("A partial")
    answer.void(2, "the stream was cut")
    answer.add("The whole answer.")
    assert answer.text == "The whole answer." == client_answer(events)
    [reset] = [e for e in events if isinstance(e, TextReset)]
    assert (reset.iteration, reset.reason) == (2, "the stream was cut")


def test_nothing_to_take_back_sends_no_reset() -> None:
    events: list[Event] = []
    answer = ShownAnswer(events.append)  # type: ignore[arg-type]

    answer.restart(TurnStart(iteration=1, budget_remaining=100))
    answer.void(1, "the reply was empty")

    assert not any(isinstance(e, TextReset) for e in events)
    assert answer.text == "" == client_answer(events)


async def test_a_call_reads_only_the_text_it_streamed() -> None:
    events: list[Event] = []
    answer = ShownAnswer(events.append)  # type: ignore[arg-type]
    answer.add("Before the call. ")

    mark = answer.mark()
    await answer.sink("During ")
    await answer.sink("the call.")

    assert answer.since(mark) == "During the call."
    assert answer.text == "Before the call. During the call." == client_answer(events)
