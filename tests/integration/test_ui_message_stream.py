"""``POST /api/chat`` through the real ``ai`` package: ``DefaultChatTransport`` and
``readUIMessageStream`` under Node (``tests/node/ui_stream_client.mjs``), against the chat
app on loopback and the scripted model.

The assertions are on the UIMessage objects the library builds (and the chunks it parsed
and validated with its own schema), compared with the run's ``done`` as the service saw it.
Refusals are checked from Python with httpx as well, and one through the transport.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentloop.ask_llm import ask_llm_tool
from agentloop.config import AgentConfig
from agentloop.faces.ui_stream import STREAM_CUT_MESSAGE, usage_json
from agentloop.models import to_wire
from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, tool_payload
from tests.sample_tools import boom, echo
from tests.served import TOKEN, ServedApp, make_service

JSON = dict[str, Any]
ANSWER = "Paris is the capital of France."


class Served(ServedApp):
    def chat(self, *cases: JSON) -> list[list[JSON]]:
        """Run the cases through the ai package; each case's turns, as the client saw them."""
        out = run_node("ui_stream_client.mjs", {"url": self.url, "token": TOKEN, "cases": cases})
        return [case["turns"] for case in out["cases"]]

    def post(self, body: Any, token: str = TOKEN) -> httpx.Response:
        return httpx.post(
            f"{self.url}/api/chat",
            json=body,
            headers={"authorization": f"Bearer {token}"},
            timeout=30,
        )


def serve(config: AgentConfig = TEST_CONFIG) -> Served:
    return Served(make_service([ask_llm_tool(), echo, boom], config), name="ui-message-stream")


@pytest.fixture
def served(llm: ScriptedLLM) -> Iterator[Served]:
    with serve() as server:
        yield server


@pytest.fixture(scope="module")
def refusing() -> Iterator[Served]:
    """One server for the refusal cases: none of them starts a run."""
    with serve() as server:
        yield server


def text_of(message: JSON) -> str:
    """The answer a UI shows: the text of the message's last step (as done.text is)."""
    parts = message["parts"]
    last_step = max((i for i, p in enumerate(parts) if p["type"] == "step-start"), default=-1)
    return "".join(p["text"] for p in parts[last_step + 1 :] if p["type"] == "text")


def kinds(message: JSON) -> list[str]:
    return [part["type"] for part in message["parts"]]


def chunk_types(turn: JSON) -> list[str]:
    return [chunk["type"] for chunk in turn["chunks"]]


def finish_of(turn: JSON) -> JSON:
    finishes: list[JSON] = [chunk for chunk in turn["chunks"] if chunk["type"] == "finish"]
    [finish] = finishes
    return finish


def user_asked(request: RecordedRequest) -> str:
    return str(next(m["content"] for m in request.messages if m["role"] == "user"))


def tool_results(request: RecordedRequest) -> list[JSON]:
    return [tool_payload(m["content"]) for m in request.messages if m["role"] == "tool"]


# -- answers --------------------------------------------------------------------------------


def test_streamed_text_becomes_one_text_part(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text=ANSWER))

    [[turn]] = served.chat({"turns": ["What is the capital of France?"]})

    assert turn["thrown"] is None
    assert turn["errors"] == []
    message = turn["message"]
    done = served.done_of_message(message)
    assert message["role"] == "assistant"
    assert kinds(message) == ["step-start", "text"]
    assert message["parts"][1]["state"] == "done"
    assert text_of(message) == done.text == ANSWER
    deltas = [c["delta"] for c in turn["chunks"] if c["type"] == "text-delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == ANSWER
    assert chunk_types(turn)[:2] == ["start", "message-metadata"]
    assert chunk_types(turn)[-3:] == ["text-end", "finish-step", "finish"]
    assert finish_of(turn)["finishReason"] == "stop"
    metadata = message["metadata"]
    assert metadata["model"] == TEST_CONFIG.default_model
    assert metadata["model"] == f"groq:{llm.requests[0].model}"
    assert metadata["stopReason"] == "completed"
    assert metadata["iterations"] == done.iterations == 1
    assert metadata["usage"] == usage_json(done.usage)
    assert metadata["usage"]["totalTokens"] > 0
    assert metadata["budgetRemaining"] == done.budget_remaining


def test_tool_calls_show_as_tool_parts_and_come_back_as_history(
    served: Served, llm: ScriptedLLM
) -> None:
    echo_call, boom_call = call("echo", text="hi"), call("boom", text="x")
    llm.script(
        Reply(text="Let me check.", tool_calls=[echo_call, boom_call]),
        Reply(text="The echo said hi; boom failed."),
        Reply(text="Second answer."),
    )
    body = {"agentloop": {"tools": ["echo", "boom"]}}

    [[first, second]] = served.chat({"body": body, "turns": ["Use the tools.", "And now?"]})

    assert first["errors"] == []
    assert second["errors"] == []
    message = first["message"]
    done = served.done_of_message(message)
    assert llm.requests[0].tool_names == ["echo", "boom"]  # the options went through
    assert kinds(message) == ["step-start", "text", "tool-echo", "tool-boom", "step-start", "text"]
    _, commentary, echoed, failed, _, answer = message["parts"]
    assert commentary["text"] == "Let me check."
    assert echoed["toolCallId"] == echo_call.id
    assert echoed["state"] == "output-available"
    assert echoed["input"] == {"text": "hi"}
    assert tool_payload(echoed["output"]) == {"ok": True, "result": "hi"}
    assert failed["toolCallId"] == boom_call.id
    assert failed["state"] == "output-error"
    assert "kaboom: x" in tool_payload(failed["errorText"])["error"]
    assert answer["text"] == text_of(message) == done.text == "The echo said hi; boom failed."
    assert message["metadata"]["iterations"] == done.iterations == 2

    # The second turn sent the UI messages the client built; the model got the run's history.
    assert text_of(second["message"]) == "Second answer."
    sent = [m for m in llm.requests[-1].messages if m["role"] != "system"]
    assert sent == [
        {"role": "user", "content": "Use the tools."},
        *to_wire(done.messages),
        {"role": "user", "content": "And now?"},
    ]


def test_a_subagent_is_shown_in_a_data_part_keyed_by_its_call(
    served: Served, llm: ScriptedLLM
) -> None:
    top = "Compare A and B."

    def respond(request: RecordedRequest) -> Reply:
        asked, results = user_asked(request), tool_results(request)
        if asked == top:
            if not results:
                return Reply(tool_calls=[call("ask_llm", queries=["What is A?", "What is B?"])])
            answers = [r["answer"] for r in results[0]["result"]]
            return Reply(text=" / ".join(answers))
        if not results:
            return Reply(tool_calls=[call("echo", text=asked[-2])])
        return Reply(text=f"{asked[-2]} is {results[0]['result']}.")

    llm.respond_with(respond)

    [[turn]] = served.chat({"body": {"agentloop": {"tools": ["ask_llm", "echo"]}}, "turns": [top]})

    assert turn["errors"] == []
    message = turn["message"]
    done = served.done_of_message(message)
    assert text_of(message) == done.text == "A is A. / B is B."
    [ask] = [p for p in message["parts"] if p["type"] == "tool-ask_llm"]
    assert ask["state"] == "output-available"
    assert ask["input"] == {"queries": ["What is A?", "What is B?"]}
    [part] = [p for p in message["parts"] if p["type"] == "data-subagent"]
    assert part["id"] == ask["toolCallId"]  # updated in place: one part for the call
    data = part["data"]
    assert (data["callId"], data["depth"]) == (ask["toolCallId"], 1)
    agents = sorted(data["agents"], key=lambda agent: agent["query"])
    assert [a["query"] for a in agents] == ["What is A?", "What is B?"]
    for agent, letter in zip(agents, "AB", strict=True):
        assert agent["status"] == "finished"
        assert agent["stopReason"] == "completed"
        assert agent["iterations"] == 2
        assert agent["text"] == f"{letter} is {letter}."  # the sub-agent's answer
        assert agent["error"] is None
        assert agent["usage"]["totalTokens"] > 0
        [tool] = agent["tools"]
        assert (tool["toolName"], tool["state"], tool["input"]) == (
            "echo",
            "output-available",
            {"text": letter},
        )
        assert tool_payload(tool["output"]) == {"ok": True, "result": letter}
    # The sub-agents' usage is in the request's: the metadata counts every depth.
    assert message["metadata"]["usage"] == usage_json(done.usage)
    assert done.usage.total_tokens > sum(a["usage"]["totalTokens"] for a in agents)
    updates = [c for c in turn["chunks"] if c["type"] == "data-subagent"]
    assert len(updates) > 2  # streamed as the sub-agents worked, not only at the end


def test_nested_subagents_each_have_their_part(llm: ScriptedLLM) -> None:
    top, levels = "Go deep.", ["level one", "level two"]
    deepest = " ".join(f"fact{i}" for i in range(300))  # hundreds of text deltas

    def respond(request: RecordedRequest) -> Reply:
        asked, results = user_asked(request), tool_results(request)
        if asked == levels[-1]:
            return Reply(text=deepest)
        if results:
            return Reply(text=f"{asked} heard: {results[0]['result']['answer'][:5]}")
        return Reply(tool_calls=[call("ask_llm", query=levels[0 if asked == top else 1])])

    llm.respond_with(respond)
    body = {"agentloop": {"tools": ["ask_llm"]}}
    with serve(TEST_CONFIG.model_copy(update={"max_depth": 2})) as served:
        [[turn]] = served.chat({"body": body, "turns": [top]})
        done = served.done_of_message(turn["message"])

    assert turn["errors"] == []
    message = turn["message"]
    assert text_of(message) == done.text == f"{top} heard: level"
    [ask] = [p for p in message["parts"] if p["type"] == "tool-ask_llm"]
    parts = {p["data"]["depth"]: p for p in message["parts"] if p["type"] == "data-subagent"}
    assert sorted(parts) == [1, 2]
    [one] = parts[1]["data"]["agents"]
    [two] = parts[2]["data"]["agents"]
    assert parts[1]["id"] == ask["toolCallId"]
    # The level-one agent's own ask_llm call is in its tool list and keys the deeper part.
    [inner_ask] = one["tools"]
    assert inner_ask["toolName"] == "ask_llm"
    assert parts[2]["id"] == parts[2]["data"]["callId"] == inner_ask["toolCallId"]
    assert (one["query"], one["text"]) == ("level one", "level one heard: fact0")
    assert (two["query"], two["text"], two["tools"]) == ("level two", deepest, [])
    assert two["status"] == one["status"] == "finished"
    # The deepest text grew in a few whole-state updates, not one per delta.
    deeper = [
        c for c in turn["chunks"] if c["type"] == "data-subagent" and c["id"] == parts[2]["id"]
    ]
    assert 3 <= len(deeper) <= 12


def test_a_limit_finishes_normally_with_the_notice(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text="What I found so far."))
    body = {"agentloop": {"tools": ["echo"], "max_iterations": 1}}

    [[turn]] = served.chat({"body": body, "turns": ["Look it up."]})

    assert turn["errors"] == []
    message = turn["message"]
    done = served.done_of_message(message)
    assert done.stop_reason == "max_iterations"
    assert finish_of(turn)["finishReason"] == "length"
    assert text_of(message) == done.text
    assert done.text.startswith("What I found so far.")
    assert "Reached the limit of 1 tool iterations" in done.text
    [notice] = [p for p in message["parts"] if p["type"] == "data-notice"]
    assert notice["data"]["code"] == "max_iterations"
    assert message["metadata"]["stopReason"] == "max_iterations"


# -- failures -------------------------------------------------------------------------------


def test_a_provider_error_ends_with_an_error_chunk(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(status=401))

    [[turn]] = served.chat({"turns": ["Hello?"]})

    message = turn["message"]
    done = served.done_of_message(message)
    assert done.stop_reason == "error"
    [error] = turn["errors"]  # readUIMessageStream's onError, from the error chunk
    assert "401" in error
    assert chunk_types(turn)[-2:] == ["error", "finish"]
    assert finish_of(turn)["finishReason"] == "error"
    assert message["metadata"]["error"]["code"] == "provider"
    assert message["metadata"]["error"]["message"] == error
    assert text_of(message) == done.text  # the run's own account of what went wrong
    assert len(llm.requests) == 1


def test_a_retried_turn_is_continued_never_contradicted(served: Served, llm: ScriptedLLM) -> None:
    other = "The capital of France is Paris."
    llm.script(
        Reply(text=ANSWER, cut_after=3),
        Reply(text=ANSWER),  # the retry repeats what was sent, then goes on
        Reply(text=ANSWER, cut_after=3),
        Reply(text=other),  # the retry says something else
    )

    [[same], [departed]] = served.chat({"turns": ["Capital?"]}, {"turns": ["Capital?"]})

    if len(llm.requests) < 4:
        pytest.fail("the loop did not retry the cut turns")
    assert same["errors"] == []
    assert text_of(same["message"]) == served.done_of_message(same["message"]).text == ANSWER
    assert finish_of(same)["finishReason"] == "stop"

    assert departed["errors"] == [STREAM_CUT_MESSAGE]
    assert text_of(departed["message"]) == "Paris is "  # the cut attempt's text, once
    assert finish_of(departed)["finishReason"] == "error"
    served.done_of_message(departed["message"])  # the run still ended and was recorded


def test_a_client_abort_cancels_the_run(served: Served, llm: ScriptedLLM) -> None:
    long_answer = " ".join(f"word{i}" for i in range(400))
    llm.script(Reply(text=long_answer, chunk_delay=0.05))  # 20 s if nobody stops it

    started = time.monotonic()
    [[turn]] = served.chat({"turns": ["Talk for a while."], "abortOnText": True})

    assert turn["aborted"]
    assert turn["thrown"] is None
    done = served.done_of_message(turn["message"])
    assert done.stop_reason == "cancelled"
    assert time.monotonic() - started < 10
    assert long_answer.startswith(done.text)
    assert done.text != long_answer
    [request] = llm.requests  # the run has ended: no further model call after the client left
    assert request.wait_disconnected(), "the model call was abandoned, not read to its end"
    assert request.client_disconnected


# -- refusals -------------------------------------------------------------------------------

USER_PART = {"type": "text", "text": "Hi"}
USER = {"id": "u1", "role": "user", "parts": [USER_PART]}


def assistant(*parts: JSON) -> JSON:
    return {"id": "a1", "role": "assistant", "parts": list(parts)}


def tool_part(**fields: Any) -> JSON:
    return {"type": "tool-echo", "toolCallId": "call_a", "input": {"text": "x"}, **fields}


def conversation(*middle: JSON) -> JSON:
    return {"id": "c1", "trigger": "submit-message", "messages": [USER, *middle, USER]}


REFUSALS: dict[str, tuple[Any, int, str | None]] = {
    "no messages": ({"messages": []}, 422, "messages"),
    "messages not a list": ({"messages": "Hi"}, 422, "messages"),
    "message not an object": ({"messages": ["Hi"]}, 422, "messages.0"),
    "unknown role": ({"messages": [{**USER, "role": "tool"}]}, 422, "messages.0.role"),
    "unknown part type": (
        {"messages": [{**USER, "parts": [{"type": "image", "text": "x"}]}]},
        422,
        "messages.0.parts.0",
    ),
    "part without a type": ({"messages": [{**USER, "parts": [{}]}]}, 422, "messages.0.parts.0"),
    "text part without text": (
        {"messages": [{**USER, "parts": [{"type": "text"}]}]},
        422,
        "messages.0.parts.0.text",
    ),
    "user message without parts": ({"messages": [{**USER, "parts": []}]}, 422, "messages.0.parts"),
    "file part with a link": (
        {"messages": [{**USER, "parts": [{"type": "file", "mediaType": "a/b", "url": "x"}]}]},
        422,
        "messages.0.parts.0.url",
    ),
    "tool part in a user message": (
        {"messages": [{**USER, "parts": [tool_part(state="output-available", output="x")]}]},
        422,
        "messages.0.parts.0.type",
    ),
    "tool part without output": (
        conversation(assistant(tool_part(state="input-available"))),
        422,
        "messages.1.parts.0.state",
    ),
    "output-available without output": (
        conversation(assistant(tool_part(state="output-available"))),
        422,
        "messages.1.parts.0.output",
    ),
    "output-error without errorText": (
        conversation(assistant(tool_part(state="output-error"))),
        422,
        "messages.1.parts.0.errorText",
    ),
    "unknown tool state": (
        conversation(assistant(tool_part(state="done", output="x"))),
        422,
        "messages.1.parts.0.state",
    ),
    "tool part without a name": (
        conversation(
            assistant({**tool_part(state="output-available", output="x"), "type": "tool-"})
        ),
        422,
        "messages.1.parts.0.type",
    ),
    "tool call id reused": (
        conversation(
            assistant(
                tool_part(state="output-available", output="x"),
                {"type": "step-start"},
                tool_part(state="output-available", output="y"),
            )
        ),
        422,
        "messages.1.parts.2.toolCallId",
    ),
    "ends with the assistant": (
        {"messages": [USER, assistant({"type": "text", "text": "Hello"})]},
        422,
        "messages.1",
    ),
    "unknown trigger": ({**conversation(), "trigger": "resume-stream"}, 422, "trigger"),
    "misspelt option": ({**conversation(), "maxIterations": 2}, 422, "maxIterations"),
    "unknown agent option": (
        {**conversation(), "agentloop": {"show_tools": True}},
        422,
        "agentloop.show_tools",
    ),
    "zero iterations": (
        {**conversation(), "agentloop": {"max_iterations": 0}},
        422,
        "agentloop.max_iterations",
    ),
    "unknown tool": (
        {**conversation(), "agentloop": {"tools": ["no_such_tool"]}},
        422,
        "agentloop.tools",
    ),
    "unknown model": ({**conversation(), "model": "nowhere:model"}, 422, "model"),
    "not an object": (["Hi"], 422, None),
    "too many messages": ({"messages": [USER] * 201}, 413, "messages"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_bad_input_is_refused_before_the_stream(
    refusing: Served, llm: ScriptedLLM, case: str
) -> None:
    body, status, param = REFUSALS[case]

    response = refusing.post(body)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert error["message"]
    assert llm.requests == []
    assert refusing.finished == []


def test_refusals_reach_the_client_through_the_transport(served: Served, llm: ScriptedLLM) -> None:
    unknown_tool = {"body": {"agentloop": {"tools": ["no_such_tool"]}}, "turns": ["Hi"]}
    wrong_token = {"token": "al_wrong", "turns": ["Hi"]}

    [[refused], [unauthorised]] = served.chat(unknown_tool, wrong_token)

    assert refused["message"] is None
    error = json.loads(refused["thrown"])["error"]  # sendMessages throws the answer's text
    assert (error["code"], error["type"], error["param"]) == (
        422,
        "invalid_tools",
        "agentloop.tools",
    )
    assert "no_such_tool" in error["message"]
    assert json.loads(unauthorised["thrown"])["error"]["code"] == 401
    assert llm.requests == []


def test_the_answer_speaks_the_protocol_on_the_wire(served: Served, llm: ScriptedLLM) -> None:
    llm.script(Reply(text=ANSWER))

    response = served.post(conversation())

    assert response.status_code == 200
    headers = response.headers
    assert headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["cache-control"] == "no-cache"
    frames = [f for f in response.text.split("\n\n") if f]
    assert all(f.startswith("data: ") for f in frames), frames
    assert frames[-1] == "data: [DONE]"
    chunks = [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]
    assert chunks[0] == {"type": "start", "messageId": f"msg-{headers['x-request-id']}"}
    assert chunks[-1]["type"] == "finish"
