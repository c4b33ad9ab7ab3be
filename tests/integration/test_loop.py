"""The agent loop end to end: handle_chat -> real SDK -> scripted model server on loopback.

Every test that takes ``model`` runs twice, through the groq SDK and the openai SDK.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from agentloop.chat import AgentSetup, ChatContext, handle_chat
from agentloop.config import AgentConfig
from agentloop.events import Done, ErrorEvent, Notice, TextDelta, ToolCallStart, TurnStart
from agentloop.logs import REQUEST_ID
from agentloop.models import AssistantMessage, ToolMessage, UserMessage
from agentloop.tools.base import ToolContext, tool
from agentloop.tools.registry import ToolRegistry
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, ToolCallSpec, call
from tests.helpers import TEST_CONFIG, make_request, run_chat, tool_payload, validate_event
from tests.sample_tools import boom, double, echo, lookup_tool, sleeper


def tool_contents(request: RecordedRequest) -> list[dict[str, object]]:
    return [tool_payload(m["content"]) for m in request.messages if m["role"] == "tool"]


async def test_plain_answer_streams_as_several_deltas(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(text="The capital of France is Paris.", usage=(42, 9)))

    result = await run_chat("Capital of France?", model=model)

    assert len(result.text_deltas) >= 3
    assert "".join(result.text_deltas) == "The capital of France is Paris."
    assert result.done.text == "The capital of France is Paris."
    assert result.done.stop_reason == "completed"
    assert result.done.usage.prompt_tokens == 42
    assert result.done.usage.completion_tokens == 9
    assert [type(e).__name__ for e in result.events[:2]] == ["RunStart", "TurnStart"]
    sent = llm.requests[0]
    assert sent.model == model.split(":", 1)[1]
    assert sent.messages[0]["role"] == "system"
    assert sent.messages[-1] == {"role": "user", "content": "Capital of France?"}
    assert sent.tools is None, "no tools offered when the run has none"


async def test_tool_result_reaches_the_answer(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(text="Let me look.", tool_calls=[call("lookup", key="answer")]))
    llm.respond_with(lambda req: Reply(text=f"The answer is {tool_contents(req)[0]['result']}."))

    result = await run_chat(
        "What is the answer?", model=model, tools=[lookup_tool({"answer": 4217})]
    )

    assert result.done.text == "The answer is 4217."
    assert result.done.iterations == 2
    [start] = result.tool_starts
    assert (start.name, json.loads(start.arguments)) == ("lookup", {"key": "answer"})
    [finished] = result.tool_results
    assert finished.ok
    assert tool_payload(finished.content) == {"ok": True, "result": 4217}
    assert llm.requests[0].tool_names == ["lookup"]


async def test_chain_uses_the_previous_result(llm: ScriptedLLM, model: str) -> None:
    def chain(req: RecordedRequest) -> Reply:
        results = tool_contents(req)
        if not results:
            return Reply(tool_calls=[call("lookup", key="seed")])
        if len(results) == 1:
            return Reply(tool_calls=[call("double", n=results[0]["result"])])
        return Reply(text=f"Doubled: {results[1]['result']}")

    llm.respond_with(chain)

    result = await run_chat(
        "Double the seed.", model=model, tools=[lookup_tool({"seed": 21}), double]
    )

    assert result.done.text == "Doubled: 42"
    assert [json.loads(s.arguments) for s in result.tool_starts] == [{"key": "seed"}, {"n": 21}]
    assert result.done.iterations == 3


async def test_calls_of_one_turn_run_concurrently_and_keep_call_order(
    llm: ScriptedLLM, model: str
) -> None:
    log: list[tuple[str, str]] = []
    llm.script(
        Reply(
            tool_calls=[
                call("sleep", label="slow", seconds=0.3),
                call("sleep", label="fast", seconds=0.01),
            ]
        ),
        Reply(text="Both done."),
    )

    result = await run_chat("Two things at once.", model=model, tools=[sleeper(log)])

    # The second call started before the first ended, and the fast one finished first.
    assert log == [("start", "slow"), ("start", "fast"), ("end", "fast"), ("end", "slow")]
    order = [
        tool_payload(m.content)["result"]
        for m in result.done.messages
        if isinstance(m, ToolMessage)
    ]
    assert order == ["slow", "fast"]
    assert [c["result"] for c in tool_contents(llm.requests[1])] == ["slow", "fast"]


async def test_concurrency_is_bounded(llm: ScriptedLLM, model: str) -> None:
    log: list[tuple[str, str]] = []
    config = TEST_CONFIG.model_copy(update={"tool_concurrency": 2})
    llm.script(
        Reply(tool_calls=[call("sleep", label=str(i), seconds=0.05) for i in range(4)]),
        Reply(text="ok"),
    )

    await run_chat("Four things.", model=model, tools=[sleeper(log)], config=config)

    running = peak = 0
    for kind, _ in log:
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak == 2


async def test_model_that_never_stops_ends_at_the_limit(llm: ScriptedLLM, model: str) -> None:
    def forever(req: RecordedRequest) -> Reply:
        if req.tool_choice == "none":
            return Reply(text="Summary of what I found.")
        return Reply(tool_calls=[call("echo", text="again")])

    llm.respond_with(forever)

    result = await run_chat("Loop forever.", model=model, tools=[echo], max_iterations=3)

    assert result.done.stop_reason == "max_iterations"
    assert [r.tool_choice for r in llm.requests] == ["auto", "auto", "auto", "none"]
    assert llm.requests[-1].tool_names == ["echo"], "tools stay offered, byte-stable"
    notice = "Reached the limit of 3 tool iterations; send a message to continue."
    assert result.done.text == f"Summary of what I found.\n\n{notice}"
    assert [n.message for n in result.of(Notice)] == [notice]
    assert "".join(result.text_deltas).endswith(notice)
    assert len(result.tool_results) == 3


async def test_done_messages_continue_the_run(llm: ScriptedLLM, model: str) -> None:
    table = lookup_tool({"a": 1, "b": 2})
    llm.script(
        Reply(tool_calls=[call("lookup", key="a")]),
        Reply(text="Gathered a so far."),  # the forced answer at the limit
    )
    first = await run_chat("Add a and b.", model=model, tools=[table], max_iterations=1)
    assert first.done.stop_reason == "max_iterations"
    kinds = [type(m).__name__ for m in first.done.messages]
    assert kinds == ["AssistantMessage", "ToolMessage", "AssistantMessage"]

    llm.reset()
    llm.script(Reply(tool_calls=[call("lookup", key="b")]))
    llm.respond_with(lambda req: Reply(text=f"Sum: {sum(c['result'] for c in tool_contents(req))}"))
    history = [
        UserMessage(content="Add a and b."),
        *first.done.messages,
        UserMessage(content="continue"),
    ]
    second = await run_chat(history, model=model, tools=[table])

    assert second.done.text == "Sum: 3"
    sent = llm.requests[0].messages
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[2]["tool_calls"][0]["function"]["name"] == "lookup"
    assert sent[3]["tool_call_id"] == sent[2]["tool_calls"][0]["id"]


@pytest.mark.parametrize(
    ("spec", "error_fragment"),
    [
        (ToolCallSpec(name="lookup", arguments='{"key": "x"'), "not valid JSON"),
        (ToolCallSpec(name="lookup", arguments='{"wrong": 1}'), "key: Field required"),
        (ToolCallSpec(name="lookup", arguments='["x"]'), "must be a JSON object"),
        (ToolCallSpec(name="nope", arguments="{}"), "unknown tool 'nope'"),
        (ToolCallSpec(name="boom", arguments='{"text": "t"}'), "RuntimeError: kaboom: t"),
        (ToolCallSpec(name="lookup", arguments='{"key": "zzz"}'), "no value for 'zzz'"),
        (ToolCallSpec(name="sleep", arguments='{"label": "z", "seconds": 2}'), "timed out"),
    ],
    ids=["malformed", "invalid", "not-object", "unknown", "raises", "tool-error", "timeout"],
)
async def test_tool_failures_become_results_the_model_recovers_from(
    llm: ScriptedLLM, model: str, spec: ToolCallSpec, error_fragment: str
) -> None:
    llm.script(Reply(tool_calls=[spec]))
    llm.respond_with(lambda req: Reply(text=f"Recovered from: {tool_contents(req)[0]['error']}"))
    tools = [lookup_tool({"a": 1}), boom, sleeper([], timeout_s=0.2)]

    result = await run_chat("Try it.", model=model, tools=tools)

    [finished] = result.tool_results
    payload = tool_payload(finished.content)
    assert finished.ok is False
    assert payload["ok"] is False
    assert error_fragment in payload["error"]
    assert result.done.stop_reason == "completed"
    assert result.done.text.startswith("Recovered from: ")
    assert error_fragment in result.done.text


async def test_budget_stops_the_run_within_one_call(llm: ScriptedLLM, model: str) -> None:
    per_call = (300, 40)
    llm.respond_with(
        lambda req: (
            Reply(text="Best answer so far.", usage=per_call)
            if req.tool_choice == "none"
            else Reply(tool_calls=[call("echo", text="more")], usage=per_call)
        )
    )
    budget = 1_000
    config = TEST_CONFIG.model_copy(update={"final_answer_reserve": 400})

    result = await run_chat(
        "A big task.", model=model, tools=[echo], token_budget=budget, config=config
    )

    assert result.done.stop_reason == "budget"
    assert result.done.usage.total_tokens <= budget + sum(per_call)
    assert result.done.text.startswith("Best answer so far.")
    assert result.done.iterations < 10
    assert llm.requests[-1].tool_choice == "none"


async def test_budget_too_small_for_any_call_still_answers(llm: ScriptedLLM, model: str) -> None:
    result = await run_chat("Hello?", model=model, token_budget=10)

    assert result.done.stop_reason == "budget"
    assert llm.requests == []
    assert "token budget" in result.done.text


async def test_cancel_during_tool_round_keeps_results(llm: ScriptedLLM, model: str) -> None:
    log: list[tuple[str, str]] = []
    llm.script(Reply(tool_calls=[call("sleep", label="work", seconds=0.2)]))
    context = ChatContext(setup=AgentSetup(config=TEST_CONFIG, tools=ToolRegistry([sleeper(log)])))
    request = make_request("Work.", model=model, tools=["sleep"])

    events = []
    async for event in handle_chat(request, context):
        validate_event(event)
        events.append(event)
        if isinstance(event, ToolCallStart):
            context.cancel.cancel()

    done = events[-1]
    assert isinstance(done, Done)
    assert done.stop_reason == "cancelled"
    assert log == [("start", "work"), ("end", "work")], "the tool round finished"
    assert [type(m).__name__ for m in done.messages] == [
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
    ]
    assert "work" in done.text
    assert len(llm.requests) == 1, "no model call after cancellation"


async def test_cancel_while_streaming_stops_the_model_call(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(text=" ".join(f"word{i}" for i in range(200)), chunk_delay=0.02))
    context = ChatContext(setup=AgentSetup(config=TEST_CONFIG))
    events = []
    async for event in handle_chat(make_request("Talk.", model=model, tools=[]), context):
        events.append(event)
        if isinstance(event, TextDelta) and len(events) > 4:
            context.cancel.cancel()

    done = events[-1]
    assert isinstance(done, Done)
    assert done.stop_reason == "cancelled"
    assert done.text.startswith("word0")
    assert "word199" not in done.text
    assert isinstance(done.messages[-1], AssistantMessage)


async def test_empty_reply_gets_one_forced_answer(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(empty=True), Reply(text="Here is an answer after all."))

    result = await run_chat("Say something.", model=model, tools=[echo])

    assert result.done.text == "Here is an answer after all."
    assert result.done.stop_reason == "completed"
    assert [r.tool_choice for r in llm.requests] == ["auto", "none"]


async def test_empty_forced_answer_falls_back_to_a_summary(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="gathered fact")]), Reply(empty=True))
    llm.respond_with(lambda req: Reply(empty=True))

    result = await run_chat("Say something.", model=model, tools=[echo])

    assert "gathered fact" in result.done.text
    assert result.done.text.startswith("I could not finish the answer")
    assert isinstance(result.done.messages[-1], AssistantMessage)


async def test_provider_error_ends_with_error_and_a_summary(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="kept result")]), Reply(status=500))

    result = await run_chat("Go.", model=model, tools=[echo])

    assert result.done.stop_reason == "error"
    [error] = result.of(ErrorEvent)
    assert error.code == "provider"
    assert "HTTP 500" in error.message
    assert "kept result" in result.done.text


async def test_cut_stream_is_an_error_not_a_crash(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(text="This stream will be cut short right here.", cut_after=3))

    result = await run_chat("Go.", model=model)

    assert result.done.stop_reason == "error"
    assert result.of(ErrorEvent)[0].code == "provider"
    assert result.done.text, "the partial text is kept as the answer"


async def test_auth_error_names_the_variable(llm: ScriptedLLM, model: str) -> None:
    llm.script(Reply(status=401))

    result = await run_chat("Go.", model=model)

    [error] = result.of(ErrorEvent)
    key_env = "GROQ_API_KEY" if model.startswith("groq") else "OPENAI_API_KEY"
    assert key_env in error.message
    assert "401" in error.message


async def test_missing_key_is_a_configuration_error(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GROQ_API_KEY")

    result = await run_chat("Hi", model="groq:llama-3.3-70b-versatile")

    [error] = result.of(ErrorEvent)
    assert error.code == "configuration"
    assert "GROQ_API_KEY is not set" in error.message
    assert result.done.stop_reason == "error"
    assert llm.requests == []
    # A refused run spent nothing: its whole budget is left (it used to say 0).
    assert result.done.budget_remaining == TEST_CONFIG.token_budget


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("mistral:large", "unknown provider 'mistral'"),
        ("gpt-4o", "not of the form 'provider:model'"),
    ],
)
async def test_bad_model_spec_is_a_clear_error(llm: ScriptedLLM, spec: str, message: str) -> None:
    result = await run_chat("Hi", model=spec)

    assert message in result.of(ErrorEvent)[0].message
    assert result.done.stop_reason == "error"


async def test_result_truncation_keeps_head_and_tail(llm: ScriptedLLM, model: str) -> None:
    from tests.sample_tools import big

    config = TEST_CONFIG.model_copy(update={"tool_result_max_chars": 500})
    llm.script(Reply(tool_calls=[call("big", n=5000)]), Reply(text="ok"))

    result = await run_chat("Big.", model=model, tools=[big], config=config)

    content = result.tool_results[0].content
    assert len(content) <= 500
    payload = tool_payload(content)
    assert payload["truncated"] is True
    assert payload["result"].startswith("abcdef")
    assert "characters cut" in payload["result"]


async def test_deadline_stops_before_a_new_turn(llm: ScriptedLLM, model: str) -> None:
    from agentloop.limits import Deadline
    from tests.sample_tools import until_deadline

    # 1.5 s kept for the answer: the first turn runs (its 1.5 s of slack are more than a
    # turn's minimum of 1 s), then the tool uses up the slack.
    config = TEST_CONFIG.model_copy(update={"deadline_reserve_s": 1.5})
    llm.script(Reply(tool_calls=[call("until_deadline", margin_s=1.4)]))
    llm.respond_with(lambda req: Reply(text="Answer under time pressure."))
    context = ChatContext(
        setup=AgentSetup(config=config, tools=ToolRegistry([until_deadline])),
        deadline=Deadline.after(3.0),
    )

    result = await run_chat("Hurry.", model=model, context=context, tools=[until_deadline])

    assert result.done.stop_reason == "deadline"
    assert result.done.text.startswith("Answer under time pressure.")
    assert [r.tool_choice for r in llm.requests] == ["auto", "none"]
    assert len(result.of(TurnStart)) == 1


async def test_concurrent_requests_each_get_their_own_stream(llm: ScriptedLLM, model: str) -> None:
    llm.respond_with(lambda req: Reply(text=f"echo {req.messages[-1]['content']}"))

    results = await asyncio.gather(*(run_chat(f"q{i}", model=model) for i in range(5)))

    assert sorted(r.done.text for r in results) == [f"echo q{i}" for i in range(5)]
    assert len({r.done.run_id for r in results}) == 5


def test_config_from_env() -> None:
    config = AgentConfig.from_env(
        {"AGENTLOOP_MAX_ITERATIONS": "3", "AGENTLOOP_ALLOWED_MODELS": "groq:*, openai:gpt-4o"}
    )
    assert config.max_iterations == 3
    assert config.allowed_models == ("groq:*", "openai:gpt-4o")


async def test_an_internal_error_still_ends_with_a_valid_history(
    llm: ScriptedLLM, model: str
) -> None:
    from tests.sample_tools import buggy

    llm.script(Reply(tool_calls=[call("buggy")]))

    result = await run_chat("Go.", model=model, tools=[buggy])

    assert result.done.stop_reason == "error"
    assert result.of(ErrorEvent)[0].code == "internal"
    history = [UserMessage(content="Go."), *result.done.messages, UserMessage(content="again")]
    make_request(history, model=model)  # a valid conversation: every call has its result


class _NoArgs(BaseModel):
    pass


_SEEN_REQUEST_IDS: list[str | None] = []


@tool(name="whoami", description="Says which request it runs for.")
async def _whoami(args: _NoArgs, ctx: ToolContext) -> str:
    _SEEN_REQUEST_IDS.append(REQUEST_ID.get())
    return "ok"


async def test_a_run_s_request_id_reaches_its_tools_and_log_lines(
    llm: ScriptedLLM, model: str
) -> None:
    """ChatContext.request_id is what the run's log lines carry (agentloop.logs.REQUEST_ID),
    for runs without the chat app too: a research job, the CLI."""
    _SEEN_REQUEST_IDS.clear()
    llm.script(Reply(tool_calls=[call("whoami")]), Reply(text="Done."))
    context = ChatContext(
        setup=AgentSetup(config=TEST_CONFIG, tools=ToolRegistry([_whoami])), request_id="job-7:1"
    )

    await run_chat("Who?", model=model, context=context, tools=[_whoami])

    assert _SEEN_REQUEST_IDS == ["job-7:1"]
    assert REQUEST_ID.get() is None  # set in the run's own task, not the caller's
