"""Provider faults and context management, through the real SDKs and the scripted server."""

from __future__ import annotations

import json

import pytest

from agentloop.chat import AgentSetup, ChatContext
from agentloop.events import ErrorEvent, ModelSwitched, Notice, TextDelta, TextReset
from agentloop.limits import Deadline
from agentloop.loop import CUT_RETRIES
from agentloop.models import ToolMessage
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, client_answer, run_chat, tool_payload
from tests.sample_tools import big, echo

GROQ = "groq:llama-3.3-70b-versatile"
OPENAI = "openai:gpt-4o-mini"


async def test_rate_limit_is_retried_after_retry_after(llm: ScriptedLLM, model: str) -> None:
    llm.script(
        Reply(status=429, headers={"retry-after": "0.05"}),
        Reply(text="Answer after waiting."),
    )

    result = await run_chat("Hi", model=model)

    assert result.done.text == "Answer after waiting."
    assert result.done.stop_reason == "completed"
    assert len(llm.requests) == 2
    assert result.of(ErrorEvent) == []


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_retried(llm: ScriptedLLM, model: str, status: int) -> None:
    llm.script(Reply(status=status), Reply(status=status), Reply(text="Third time lucky."))

    result = await run_chat("Hi", model=model)

    assert result.done.text == "Third time lucky."
    assert len(llm.requests) == 3


async def test_persistent_outage_switches_to_the_next_model(llm: ScriptedLLM) -> None:
    llm.respond_with(
        lambda req: Reply(status=503) if req.flavour == "groq" else Reply(text="From OpenAI.")
    )
    config = TEST_CONFIG.model_copy(update={"fallback_models": (OPENAI,)})

    result = await run_chat("Hi", model=GROQ, config=config)

    assert result.done.text == "From OpenAI."
    [switch] = result.of(ModelSwitched)
    assert (switch.from_model, switch.to_model) == (GROQ, OPENAI)
    assert "503" in switch.reason
    assert [r.flavour for r in llm.requests] == ["groq"] * 3 + ["openai"]


async def test_the_chain_sticks_to_the_model_that_works(llm: ScriptedLLM) -> None:
    def respond(req: RecordedRequest) -> Reply:
        if req.flavour == "groq":
            return Reply(status=503)
        if any(m["role"] == "tool" for m in req.messages):
            return Reply(text="done")
        return Reply(tool_calls=[call("echo", text="x")])

    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(update={"fallback_models": (OPENAI,)})

    result = await run_chat("Hi", model=GROQ, tools=[echo], config=config)

    assert result.done.text == "done"
    assert [r.flavour for r in llm.requests] == ["groq"] * 3 + ["openai", "openai"]


async def test_remembered_rate_limit_skips_an_exhausted_model(llm: ScriptedLLM) -> None:
    config = TEST_CONFIG.model_copy(update={"fallback_models": (OPENAI,)})
    exhausted = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2m59.56s"}
    llm.script(Reply(text="first answer", headers=exhausted))
    first = await run_chat("one", model=GROQ, config=config)
    assert first.done.text == "first answer"

    llm.reset()
    llm.respond_with(lambda req: Reply(text=f"answered by {req.flavour}"))
    second = await run_chat("two", model=GROQ, config=config)

    assert second.done.text == "answered by openai"
    assert [r.flavour for r in llm.requests] == ["openai"]
    [switch] = second.of(ModelSwitched)
    assert "rate-limited" in switch.reason


async def test_no_retry_that_would_pass_the_deadline(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(status=429, headers={"retry-after": "3"}), Reply(text="too late"))
    config = TEST_CONFIG.model_copy(update={"deadline_reserve_s": 1.0})
    context = ChatContext(setup=AgentSetup(config=config), deadline=Deadline.after(4.0))

    result = await run_chat("Hi", model=model, context=context, tools=[])

    assert len(llm.requests) == 1
    assert result.done.stop_reason == "error"
    [error] = result.of(ErrorEvent)
    assert "would pass the deadline" in error.message


async def test_auth_errors_are_not_retried(llm: ScriptedLLM, model: str) -> None:
    llm.respond_with(lambda req: Reply(status=401))
    config = TEST_CONFIG.model_copy(update={"fallback_models": (OPENAI, GROQ)})

    result = await run_chat("Hi", model=model, config=config)

    assert len(llm.requests) == 1
    [error] = result.of(ErrorEvent)
    key = "GROQ_API_KEY" if model == GROQ else "OPENAI_API_KEY"
    assert key in error.message
    assert result.of(ModelSwitched) == []


async def test_tool_use_failed_becomes_a_correctable_error(llm: ScriptedLLM) -> None:
    llm.script(
        Reply(
            status=400,
            error_message="Failed to call a function. Please adjust your prompt.",
            error_code="tool_use_failed",
            error_fields={"failed_generation": '<function=echo>{"text": "hi"</function>'},
        )
    )

    def respond(req: RecordedRequest) -> Reply:
        results = [tool_payload(m["content"]) for m in req.messages if m["role"] == "tool"]
        if len(results) == 1:
            return Reply(tool_calls=[call("echo", text="hi")])
        return Reply(text=f"fixed: {results[-1]['result']}")

    llm.respond_with(respond)

    result = await run_chat("Echo hi.", model=GROQ, tools=[echo])

    assert result.done.text == "fixed: hi"
    assert result.done.stop_reason == "completed"
    retry_request = llm.requests[1]
    failed = next(m for m in retry_request.messages if m["role"] == "tool")
    assert "could not be parsed" in tool_payload(failed["content"])["error"]
    assert result.of(ErrorEvent) == []


async def test_stream_cut_before_any_text_is_retried(llm: ScriptedLLM, model: str) -> None:
    llm.script(
        Reply(tool_calls=[call("echo", text="x" * 60)], cut_after=3),
        Reply(text="Recovered answer."),
    )

    result = await run_chat("Hi", model=model, tools=[echo])

    assert result.done.text == "Recovered answer."
    assert len(llm.requests) == 2
    assert result.of(ErrorEvent) == []


async def test_stream_cut_after_text_is_retried_and_the_client_drops_the_partial(
    llm: ScriptedLLM, model: str
) -> None:
    llm.script(
        Reply(text="The first words arrive and then the line drops.", cut_after=4),
        Reply(text="The whole answer, this time."),
    )

    result = await run_chat("Hi", model=model)

    assert len(llm.requests) == 2
    assert result.done.stop_reason == "completed"
    assert result.done.text == "The whole answer, this time."
    resets = result.of(TextReset)
    assert [r.iteration for r in resets] == [1]
    cut = result.events.index(resets[0])
    before = "".join(e.text for e in result.events[:cut] if isinstance(e, TextDelta))
    assert before.startswith("The first")  # the partial did reach the client first
    assert client_answer(result.events) == result.done.text
    assert result.of(ErrorEvent) == []


async def test_a_stream_cut_every_time_ends_with_the_last_partial(
    llm: ScriptedLLM, model: str
) -> None:
    llm.script(
        *[Reply(text="The first words arrive and then the line drops.", cut_after=4)]
        * (CUT_RETRIES + 1)
    )

    result = await run_chat("Hi", model=model)

    assert len(llm.requests) == CUT_RETRIES + 1
    assert len(result.of(TextReset)) == CUT_RETRIES
    assert result.done.stop_reason == "error"
    assert [e.code for e in result.of(ErrorEvent)] == ["provider"]
    assert result.done.text.startswith("The first")
    assert client_answer(result.events) == result.done.text


async def test_context_length_error_is_retried_once_with_a_compacted_history(
    llm: ScriptedLLM, model: str
) -> None:
    def respond(req: RecordedRequest) -> Reply:
        tools = [m for m in req.messages if m["role"] == "tool"]
        if not tools:
            return Reply(tool_calls=[call("big", n=3000)])
        if len(tools) == 1:
            return Reply(tool_calls=[call("big", n=3000)])
        if len(json.dumps(req.messages)) > 5_000:
            return Reply(
                status=400,
                error_code="context_length_exceeded",
                error_message="This model's maximum context length is 8192 tokens.",
            )
        return Reply(text="It fits now.")

    llm.respond_with(respond)
    config = TEST_CONFIG.model_copy(update={"tool_preview_chars": 2_000})

    result = await run_chat("Read both.", model=model, tools=[big], config=config)

    assert result.done.text == "It fits now."
    assert [n.code for n in result.of(Notice)] == ["context_compacted"]
    sizes = [len(json.dumps(r.messages)) for r in llm.requests]
    assert sizes[-1] < sizes[-2]
    full = [m for m in result.done.messages if isinstance(m, ToolMessage)]
    assert all(len(m.content) > 2_900 for m in full), "the run keeps full results"


async def test_older_tool_results_are_sent_as_previews(llm: ScriptedLLM, model: str) -> None:
    def respond(req: RecordedRequest) -> Reply:
        tools = [m for m in req.messages if m["role"] == "tool"]
        if len(tools) < 3:
            return Reply(tool_calls=[call("big", n=2_000 + len(tools))])
        return Reply(text="done")

    llm.respond_with(respond)

    await run_chat("Read three.", model=model, tools=[big])

    last = [m["content"] for m in llm.requests[-1].messages if m["role"] == "tool"]
    assert [json.loads(c).get("compacted", False) for c in last] == [True, True, False]
    assert len(last[-1]) > 2_000


async def test_system_prompt_and_tools_are_byte_identical_on_every_turn(
    llm: ScriptedLLM, model: str
) -> None:
    def respond(req: RecordedRequest) -> Reply:
        if req.tool_choice == "none":
            return Reply(text="final")
        return Reply(tool_calls=[call("big", n=1_500)])

    llm.respond_with(respond)

    await run_chat("Go on.", model=model, tools=[big, echo], max_iterations=4)

    assert len(llm.requests) == 5
    firsts = {json.dumps(r.messages[0]) for r in llm.requests}
    tools = {json.dumps(r.tools) for r in llm.requests}
    assert len(firsts) == 1
    assert len(tools) == 1
    # Each request's history starts with the previous request's history (a stable prefix),
    # apart from the one tool result that became a preview since.
    for before, after in zip(llm.requests, llm.requests[1:], strict=False):
        shared = [a == b for a, b in zip(before.messages, after.messages, strict=False)]
        assert shared.count(False) <= 1


async def test_cached_prompt_tokens_are_reported(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(text="cached", usage=(1_000, 10, 800)))

    result = await run_chat("Hi", model=model)

    assert result.done.usage.cached_tokens == 800
