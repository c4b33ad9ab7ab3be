"""Model output as hostile input, cut streams and real deadlines, through both real SDKs.

Every run here goes through ``run_chat``, which also checks the client invariants: the
answer a client shows (``client_answer``) equals ``done.text``, and ``done.messages`` are a
history the server accepts back. The deadline cases run through the real HTTP app, with the
deadline Lambda Web Adapter passes, and measure how long before it ``done`` arrives.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from agentloop.config import AgentConfig
from agentloop.events import ErrorEvent, TextReset, ToolCallResult
from agentloop.llm.untrusted import CALL_ID, MAX_CALLS_PER_TURN, NAME
from chat_app import create_app
from tests.fakes.scripted_llm import Reply, ScriptedLLM, ToolCallSpec, call
from tests.helpers import TEST_CONFIG, client_answer, iter_sse, run_chat, tool_payload
from tests.sample_tools import echo
from tests.served import LOCAL, TOKEN, make_service


def provider_history_is_valid(messages: list[dict[str, Any]]) -> None:
    """What a provider is sent back: valid names, short unique ids, every call answered."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending
            pending.discard(message["tool_call_id"])
        for tool_call in message.get("tool_calls") or ():
            assert NAME.fullmatch(tool_call["function"]["name"])
            assert CALL_ID.fullmatch(tool_call["id"])
            assert tool_call["id"] not in pending
            pending.add(tool_call["id"])
    assert not pending


async def test_hostile_tool_calls_are_answered_not_crashed_on(llm: ScriptedLLM, model: str) -> None:
    llm.script(
        Reply(
            tool_calls=[
                ToolCallSpec("x" * 200, "{}", "call_long_name"),
                ToolCallSpec("bad name!", "{}", "call_bad_name"),
                ToolCallSpec("echo", '{"text": "first"}', "dup"),
                ToolCallSpec("echo", '{"text": "second"}', "dup"),
                ToolCallSpec("echo", "not json at all", "i" * 100),
                ToolCallSpec("echo", "[1, 2]", "call_list"),
                ToolCallSpec("nope", "{}", "call_unknown"),
            ],
            finish_reason="banana",
        ),
        Reply(text="Corrected."),
    )

    result = await run_chat("Go.", model=model, tools=[echo])

    assert result.done.stop_reason == "completed"
    assert result.done.text == "Corrected."
    assert result.of(ErrorEvent) == []
    payloads = [tool_payload(r.content) for r in result.tool_results]
    assert [p["ok"] for p in payloads] == [False, False, True, True, False, False, False]
    assert "is not a valid name" in payloads[0]["error"]
    assert "'bad name!'" in payloads[1]["error"]
    assert "not valid JSON" in payloads[4]["error"]
    assert "JSON object" in payloads[5]["error"]
    assert "unknown tool 'nope'" in payloads[6]["error"]
    ids = [r.call_id for r in result.tool_results]
    assert len(set(ids)) == len(ids)
    assert all(CALL_ID.fullmatch(i) for i in ids)
    provider_history_is_valid(llm.requests[1].messages)


async def test_more_calls_than_a_turn_runs_are_answered_with_an_error(
    llm: ScriptedLLM, model: str
) -> None:
    llm.script(
        Reply(tool_calls=[call("echo", text=str(i)) for i in range(MAX_CALLS_PER_TURN + 3)]),
        Reply(text="Done."),
    )

    result = await run_chat("Go.", model=model, tools=[echo])

    oks = [tool_payload(r.content)["ok"] for r in result.tool_results]
    assert oks == [True] * MAX_CALLS_PER_TURN + [False] * 3
    assert "at most 32 tool calls" in tool_payload(result.tool_results[-1].content)["error"]


async def test_lone_surrogates_from_the_provider_never_reach_an_encoder(
    llm: ScriptedLLM, model: str
) -> None:
    llm.script(
        Reply(tool_calls=[ToolCallSpec("echo\ud800", '{"text": "a\\ud800b"}', "call_s")]),
        Reply(text="half \ud800 of a pair"),
    )

    result = await run_chat("Go.", model=model, tools=[echo])

    assert result.done.text == "half \ufffd of a pair"
    json.dumps(result.done.model_dump()).encode("utf-8")
    for event in result.events:
        event.model_dump_json().encode("utf-8")
    provider_history_is_valid(llm.requests[1].messages)


async def test_text_no_encoder_takes_is_a_local_fault_never_sent_nor_retried(
    llm: ScriptedLLM, model: str
) -> None:
    """Were a lone surrogate to get past every check, the call fails at once as ours."""
    from agentloop.llm.base import ModelCall, ProviderError
    from agentloop.llm.registry import get_model

    async def ignore(_: str) -> None:
        return None

    call_ = ModelCall(messages=[{"role": "user", "content": "\ud800 hi"}], timeout=5)
    with pytest.raises(ProviderError) as caught:
        await get_model(model).complete(call_, ignore)

    assert caught.value.kind == "bad_request"
    assert not caught.value.retryable
    assert "could not be built" in caught.value.message
    assert llm.requests == []


# ---- property: whatever the model streams, the run ends well ---------------------------------

names = st.one_of(
    st.just("echo"),
    st.text(max_size=80),
    st.text(alphabet="abc_-", min_size=1, max_size=70),
)
ids = st.one_of(st.none(), st.just("dup"), st.text(max_size=60))
arguments = st.one_of(
    st.just('{"text": "ok"}'),
    st.text(max_size=200),
    st.builds(lambda v: json.dumps({"text": v}), st.text(max_size=50)),
)
calls = st.lists(st.builds(ToolCallSpec, names, arguments, ids), max_size=6)


def _reply(
    text: str | None, tool_calls: list[ToolCallSpec], cut: int | None, finish: str | None
) -> Reply:
    if text is None and not tool_calls and cut is None:
        text = "x"
    return Reply(text=text, tool_calls=tool_calls, cut_after=cut, finish_reason=finish)


replies = st.one_of(
    st.just(Reply(empty=True)),
    st.builds(
        _reply,
        st.one_of(st.none(), st.text(min_size=1, max_size=60)),
        calls,
        st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
        st.one_of(st.none(), st.sampled_from(["stop", "length", "tool_calls", "banana", ""])),
    ),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(script=st.lists(replies, min_size=1, max_size=4))
async def test_any_model_output_ends_in_one_done_with_the_invariants(
    llm: ScriptedLLM, model: str, script: list[Reply]
) -> None:
    llm.reset()
    llm.script(*script, Reply(text="The end."))
    config = TEST_CONFIG.model_copy(update={"max_iterations": 4})

    result = await run_chat("Go.", model=model, tools=[echo], config=config)

    # run_chat checked: exactly one done, last; answer shown == done.text; history accepted.
    assert not [e for e in result.of(ErrorEvent) if e.code == "internal"]
    for request in llm.requests:
        provider_history_is_valid(request.messages)


# ---- deadlines: done arrives before the deadline, whatever the model does ---------------------

TRICKLE = "word " * 2000

DEADLINE_CASES: dict[str, list[Reply]] = {
    "text-trickle": [Reply(text=TRICKLE, chunk_delay=0.05)],
    "silent-model": [Reply(text="late", first_delay=30)],
    "tool-then-trickle": [
        Reply(tool_calls=[call("echo", text="x")]),
        Reply(text=TRICKLE, chunk_delay=0.1),
    ],
    "trickled-arguments": [Reply(tool_calls=[call("echo", text="y" * 4000)], chunk_delay=0.02)],
    "cut-then-trickle": [
        Reply(text="The first words then the line drops", cut_after=4),
        Reply(text=TRICKLE, chunk_delay=0.07),
    ],
}


def _deadline_margin(reserve: float, seconds: float) -> float:
    """Run one chat through the HTTP app with a Lambda deadline ``seconds`` away; how long
    before it ``done`` arrived. Also checks the answer shown equals ``done.text``."""
    config = AgentConfig(**{**TEST_CONFIG.model_dump(), "deadline_reserve_s": reserve})
    service = make_service([echo], config=config)
    deadline_s = time.time() + seconds
    headers = {
        "authorization": f"Bearer {TOKEN}",
        "x-amzn-lambda-context": json.dumps({"deadline": int(deadline_s * 1000)}),
    }
    body = {"messages": [{"role": "user", "content": "Go."}], "model": "groq:m", "tools": ["echo"]}
    events: list[tuple[str, dict[str, Any] | None]] = []
    arrived = 0.0
    with (
        TestClient(create_app(service), base_url=LOCAL) as client,
        client.stream("POST", "/chat", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        for kind, data in iter_sse(response.iter_lines()):
            events.append((kind, data))
            if kind == "done" and data is not None and data["depth"] == 0:
                arrived = time.time()

    assert arrived, f"no done: {[k for k, _ in events]}"
    done = next(d for k, d in events if k == "done" and d is not None and d["depth"] == 0)
    shown: list[str] = []
    for kind, data in events:
        if kind in ("turn_start", "tool_call_result", "text_reset"):
            shown.clear()
        elif kind == "text_delta" and data is not None and data["depth"] == 0:
            shown.append(data["text"])
    assert "".join(shown) == done["text"]
    assert done["stop_reason"] in ("deadline", "completed", "error")
    return deadline_s - arrived


@pytest.mark.parametrize("reserve", [0.0, 1.0])
@pytest.mark.parametrize("case", sorted(DEADLINE_CASES))
def test_done_arrives_before_the_deadline(
    llm: ScriptedLLM, case: str, reserve: float, record_property: Callable[[str, object], None]
) -> None:
    llm.script(*DEADLINE_CASES[case])
    llm.respond_with(lambda _: Reply(text=TRICKLE, chunk_delay=0.05))  # forced answers trickle
    margin = _deadline_margin(reserve, 2.5)
    record_property("deadline_margin_s", round(margin, 3))  # the figure architecture.md quotes
    assert margin > 0, f"done arrived {-margin:.3f} s after the deadline"


trickles = st.builds(
    lambda tool_first, delay, first, cut: [
        *([Reply(tool_calls=[call("echo", text="x")], chunk_delay=delay)] if tool_first else []),
        Reply(text=TRICKLE, chunk_delay=delay, first_delay=first, cut_after=cut),
    ],
    st.booleans(),
    st.floats(min_value=0.005, max_value=0.4),
    st.sampled_from([0.0, 0.3, 1.2, 5.0]),
    st.one_of(st.none(), st.integers(min_value=2, max_value=30)),
)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(script=trickles, reserve=st.sampled_from([0.0, 0.4]))
def test_done_arrives_before_the_deadline_for_fuzzed_trickles(
    llm: ScriptedLLM,
    script: list[Reply],
    reserve: float,
    record_property: Callable[[str, object], None],
) -> None:
    llm.reset()
    llm.script(*script)
    llm.respond_with(lambda _: Reply(text=TRICKLE, chunk_delay=0.05))
    margin = _deadline_margin(reserve, 1.8)
    record_property("deadline_margin_s", round(margin, 3))
    assert margin > 0, f"done arrived {-margin:.3f} s after the deadline"


# ---- a timed-out call's partial text and the summary never both claim to be the answer ------


async def test_a_turn_cut_by_the_deadline_keeps_what_was_streamed(
    llm: ScriptedLLM, model: str
) -> None:
    from agentloop.chat import AgentSetup, ChatContext
    from agentloop.limits import Deadline
    from agentloop.tools.registry import ToolRegistry

    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text=TRICKLE, chunk_delay=0.05))
    config = AgentConfig(**{**TEST_CONFIG.model_dump(), "deadline_reserve_s": 0.5})
    context = ChatContext(
        setup=AgentSetup(config=config, tools=ToolRegistry([echo])), deadline=Deadline.after(2.0)
    )

    result = await run_chat("Go.", model=model, tools=[echo], context=context)

    assert result.done.stop_reason == "deadline"
    assert result.done.text.startswith("word word")
    assert re.search(r"ran out of time", result.done.text)
    assert result.of(TextReset) == []
    assert client_answer(result.events) == result.done.text
    assert isinstance(result.events[-2], ToolCallResult) is False
