"""``POST /ag-ui`` through the real ``@ag-ui/client`` ``HttpAgent`` (Node), and its refusals.

One Node process runs every scenario against one served app (``tests/node/ag_ui_client.mjs``);
each test then checks what the client library made of its scenario: the messages its reducer
built, the events that passed its verifier, its subscriber callbacks. The scripted model tells
the scenarios apart by their first user message. The refusals are plain HTTP, from httpx.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agentloop.ask_llm import ask_llm_tool
from agentloop.events import Done
from tests.fakes.node_client import run_node
from tests.fakes.pytest_plugin import provider_env_for_module
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, tool_payload
from tests.sample_tools import echo, sleeper
from tests.served import AUTH, TOKEN, ServedApp, make_service

ANSWER = "Paris is the capital of France."
OTHER = "The capital of France is Paris."
JSON = dict[str, Any]


def first_user(request: RecordedRequest) -> str:
    return str(next(m["content"] for m in request.messages if m["role"] == "user"))


def tool_results(request: RecordedRequest) -> list[JSON]:
    return [m for m in request.messages if m["role"] == "tool"]


class Model:
    """The scripted model's answers, per scenario (told apart by the first user message)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def __call__(self, request: RecordedRequest) -> Reply:
        asked = first_user(request)
        count = self.calls[asked] = self.calls.get(asked, 0) + 1
        last = request.messages[-1]["role"]
        results = tool_results(request)
        if asked == "text":
            return Reply(text=ANSWER, usage=(30, 12))
        if asked == "tools":
            if last == "user" and results:
                return Reply(text="Done again.")
            if last == "user":
                calls = [call("echo", text="hi"), call("echo", text="there")]
                return Reply(text="Let me echo.", tool_calls=calls)
            return Reply(text="Echoed: hi there")
        if asked == "subagent":
            if last == "user" and results:
                return Reply(text="You're welcome.")
            if last == "user":
                return Reply(tool_calls=[call("ask_llm", query="What is A?")])
            return Reply(text=f"Final: {tool_payload(results[0]['content'])['result']['answer']}")
        if asked == "What is A?":
            if not results:
                return Reply(
                    text="Looking A up.",
                    tool_calls=[call("echo", text="A=42"), call("ask_llm", query="Confirm A")],
                )
            return Reply(text="A is 42.")
        if asked == "Confirm A":  # slower than the heartbeat: pings amid the events
            return Reply(text="A is confirmed.", first_delay=0.2)
        if asked == "subagent-cut":
            if results:
                return Reply(text="Done.")
            return Reply(tool_calls=[call("ask_llm", query="Cut me")])
        if asked == "Cut me":
            if count == 1:
                return Reply(text=ANSWER, cut_after=3)
            return Reply(text=OTHER)
        if asked == "limit":
            if request.tool_choice == "none":
                return Reply(text="What I have so far.")
            return Reply(tool_calls=[call("echo", text="more")])
        if asked == "provider-error":
            return Reply(status=400, error_message="the prompt was refused upstream")
        if asked in ("cut-same", "cut-other"):
            if count == 1:
                return Reply(text=ANSWER, cut_after=3)
            return Reply(text=ANSWER if asked == "cut-same" else OTHER)
        if asked == "abort":
            return Reply(tool_calls=[call("sleep", label="s", seconds=0.5)])
        raise AssertionError(f"no script for {asked!r}")


CASES: list[JSON] = [
    {
        "name": "text",
        "initialMessages": [{"id": "dev-1", "role": "developer", "content": "Answer briefly."}],
        "turns": [
            {
                "user": "text",
                "params": {
                    "forwardedProps": {"agentloop": {"model": "openai:gpt-4o-mini", "tools": []}},
                    "context": [{"description": "user locale", "value": "fr-FR"}],
                },
            }
        ],
    },
    {
        "name": "tools",
        "turns": [
            {"user": "tools", "params": {"forwardedProps": {"agentloop": {"tools": ["echo"]}}}},
            {"user": "and again", "params": {"forwardedProps": {"agentloop": {"tools": ["echo"]}}}},
        ],
    },
    {
        "name": "subagent",
        "turns": [
            {
                "user": "subagent",
                "params": {"forwardedProps": {"agentloop": {"tools": ["ask_llm", "echo"]}}},
            },
            {"user": "thanks", "params": {"forwardedProps": {"agentloop": {"tools": []}}}},
        ],
    },
    {
        "name": "limit",
        "turns": [
            {
                "user": "limit",
                "params": {
                    "forwardedProps": {"agentloop": {"tools": ["echo"], "max_iterations": 1}}
                },
            }
        ],
    },
    {
        "name": "subagent-cut",
        "turns": [
            {
                "user": "subagent-cut",
                "params": {"forwardedProps": {"agentloop": {"tools": ["ask_llm"]}}},
            }
        ],
    },
    {"name": "provider-error", "turns": [{"user": "provider-error"}]},
    {"name": "cut-same", "turns": [{"user": "cut-same"}]},
    {"name": "cut-other", "turns": [{"user": "cut-other"}]},
    {
        "name": "abort",
        "turns": [
            {
                "user": "abort",
                "params": {"forwardedProps": {"agentloop": {"tools": ["sleep"]}}},
                "abortOn": "TOOL_CALL_START",
            }
        ],
    },
    {
        "name": "client-tools",
        "turns": [
            {
                "user": "client-tools",
                "params": {
                    "tools": [{"name": "confirm", "description": "Ask the user to confirm."}]
                },
            }
        ],
    },
]


@dataclass
class Session:
    url: str
    cases: dict[str, list[JSON]]
    printed: list[str]
    requests: list[RecordedRequest]
    finished: dict[str, Done]
    """Each run's done, by request id: ``<case>-<turn index>``."""

    def turn(self, name: str, index: int = 0) -> JSON:
        return self.cases[name][index]

    def asked(self, text: str) -> list[RecordedRequest]:
        return [r for r in self.requests if first_user(r) == text]


@pytest.fixture(scope="module")
def session(llm_server: ScriptedLLM) -> Iterator[Session]:
    config = TEST_CONFIG.model_copy(update={"max_depth": 2})
    service = make_service([echo, sleeper([]), ask_llm_tool()], config=config, heartbeat_s=0.05)
    with provider_env_for_module(llm_server), ServedApp(service, name="ag-ui-face") as served:
        llm_server.respond_with(Model())
        output = run_node("ag_ui_client.mjs", {"url": served.url, "token": TOKEN, "cases": CASES})
        served.runs(sum(len(c["turns"]) for c in CASES if c["name"] != "client-tools"))
        finished = {info.request_id: done for done, info in served.finished_runs.runs}
        yield Session(served.url, output["cases"], output["printed"], llm_server.requests, finished)


def types(record: JSON) -> list[str]:
    return [e["type"] for e in record["events"]]


def outline(record: JSON) -> list[str]:
    """The event types, each run of TEXT_MESSAGE_CONTENT as one."""
    kinds = types(record)
    return [k for i, k in enumerate(kinds) if k != "TEXT_MESSAGE_CONTENT" or kinds[i - 1] != k]


def of(record: JSON, kind: str) -> list[JSON]:
    return [e for e in record["events"] if e["type"] == kind]


def shown(record: JSON) -> list[tuple[str, Any]]:
    """The client's messages as (role, content), sub-agents' left out."""
    return [(m["role"], m.get("content")) for m in record["messages"] if "subagentRunId" not in m]


def test_the_client_accepts_every_event_as_is(session: Session) -> None:
    """Nothing was stripped, translated or refused by the client's schema or verifier."""
    assert [line for line in session.printed if "[ag-ui]" in line] == []
    for name, turns in session.cases.items():
        for record in turns:
            if name != "client-tools":
                assert record["failed"] is None, (name, record["failed"])
                assert record["thrown"] is None, (name, record["thrown"])


def test_streamed_text_is_the_assistant_message(session: Session) -> None:
    record = session.turn("text")

    kinds = types(record)
    assert kinds[:3] == ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START"]
    assert kinds[-3:] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"]
    deltas = [e["delta"] for e in of(record, "TEXT_MESSAGE_CONTENT")]
    assert len(deltas) > 1, "streamed, not sent whole"
    assert "".join(deltas) == ANSWER
    assert shown(record) == [
        ("developer", "Answer briefly."),
        ("user", "text"),
        ("assistant", ANSWER),
    ]
    [started] = of(record, "RUN_STARTED")
    [finished] = of(record, "RUN_FINISHED")
    assert started["threadId"] == finished["threadId"] == "thread-text"
    assert started["runId"] == finished["runId"]
    assert of(record, "STEP_STARTED")[0]["stepName"] == "turn 1"


def test_usage_and_budget_are_in_run_finished(session: Session) -> None:
    record = session.turn("text")
    done = session.finished["text-0"]

    assert record["finished"]["outcome"] == "success"
    assert record["result"] == record["finished"]["result"], "runAgent returns RUN_FINISHED.result"
    assert record["result"] == {
        "model": "openai:gpt-4o-mini",
        "stop_reason": "completed",
        "iterations": 1,
        "usage": {
            "prompt_tokens": 30,
            "completion_tokens": 12,
            "cached_tokens": 0,
            "total_tokens": 42,
        },
        "usage_by_depth": [
            {"prompt_tokens": 30, "completion_tokens": 12, "cached_tokens": 0, "total_tokens": 42}
        ],
        "budget_remaining": done.budget_remaining,
        "sources": [],
    }
    assert record["finished"]["usage"] == [
        {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "inputTokens": 30,
            "outputTokens": 12,
            "totalTokens": 42,
            "cachedInputTokens": 0,
        }
    ]


def test_input_becomes_the_model_conversation(session: Session) -> None:
    """developer -> system, context -> one system message, forwardedProps.agentloop options."""
    [request] = session.asked("text")

    assert request.model == "gpt-4o-mini"
    assert request.tools is None, "forwardedProps.agentloop.tools: [] offers none"
    assert request.messages[1:] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "system", "content": "Context from the application:\n- user locale: fr-FR"},
        {"role": "user", "content": "text"},
    ]


def test_server_tool_call_and_its_result(session: Session) -> None:
    record = session.turn("tools")
    first, second = session.asked("tools")[:2]
    calls = second.messages[2]["tool_calls"]

    assert first.tool_names == ["echo"]
    assert outline(record) == [
        "RUN_STARTED",
        "STEP_STARTED",
        *["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"],
        *["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"] * 2,
        "STEP_FINISHED",
        "STEP_STARTED",
        *["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"],
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    text_message = of(record, "TEXT_MESSAGE_START")[0]["messageId"]
    assert {e["parentMessageId"] for e in of(record, "TOOL_CALL_START")} == {text_message}
    assert all(e["metadata"]["agentloop"]["ok"] for e in of(record, "TOOL_CALL_RESULT"))
    user, assistant, *tools, answer = record["messages"]
    assert user["content"] == "tools"
    assert (assistant["id"], assistant["content"]) == (text_message, "Let me echo.")
    assert assistant["toolCalls"] == calls, "one assistant message with both calls, as sent"
    assert [(t["role"], t["toolCallId"], t["content"]) for t in tools] == [
        ("tool", m["tool_call_id"], m["content"]) for m in tool_results(second)
    ], "the results exactly as the model saw them"
    assert (answer["role"], answer["content"]) == ("assistant", "Echoed: hi there")


def test_the_clients_history_is_the_models_conversation(session: Session) -> None:
    """The second turn sends the client's messages back; the model sees the first turn as it
    happened (assistant with tool_calls, tool result, answer), then the new question."""
    first_turn, second_turn = session.asked("tools")[1], session.asked("tools")[2]

    assert second_turn.messages[1:] == [
        *first_turn.messages[1:],
        {"role": "assistant", "content": "Echoed: hi there"},
        {"role": "user", "content": "and again"},
    ]
    assert shown(session.turn("tools", 1))[-1] == ("assistant", "Done again.")


def test_ask_llm_runs_as_ag_ui_subagents(session: Session) -> None:
    record = session.turn("subagent")
    [top_ask] = [e for e in of(record, "TOOL_CALL_START") if "subagentRunId" not in e]
    outer, inner = of(record, "SUBAGENT_STARTED")
    [inner_ask] = [
        e
        for e in of(record, "TOOL_CALL_START")
        if e["toolCallName"] == "ask_llm" and e is not top_ask
    ]

    assert outer["name"] == inner["name"] == "ask_llm"
    assert outer["description"] == "What is A?"
    assert outer["parentToolCallId"] == top_ask["toolCallId"]
    assert outer["parentMessageId"] == top_ask["parentMessageId"]
    assert "parentSubagentRunId" not in outer
    assert inner["description"] == "Confirm A"
    assert inner["parentToolCallId"] == inner_ask["toolCallId"]
    assert inner["parentSubagentRunId"] == outer["subagentRunId"] == inner_ask["subagentRunId"]
    finished = of(record, "SUBAGENT_FINISHED")
    assert [f["subagentRunId"] for f in finished] == [
        inner["subagentRunId"],
        outer["subagentRunId"],
    ]
    assert all(f["result"]["stop_reason"] == "completed" for f in finished)
    assert record["callbacks"] == [
        ["started", outer["subagentRunId"]],
        ["started", inner["subagentRunId"]],
        ["finished", inner["subagentRunId"]],
        ["finished", outer["subagentRunId"]],
    ]
    by_subagent = {
        (m["subagentRunId"], m["role"], m.get("content"))
        for m in record["messages"]
        if "subagentRunId" in m and m["role"] == "assistant" and m.get("content")
    }
    assert by_subagent == {
        (outer["subagentRunId"], "assistant", "Looking A up."),
        (outer["subagentRunId"], "assistant", "A is 42."),
        (inner["subagentRunId"], "assistant", "A is confirmed."),
    }
    [turn_one] = [m for m in record["messages"] if m.get("content") == "Looking A up."]
    assert [c["function"]["name"] for c in turn_one["toolCalls"]] == ["echo", "ask_llm"]
    assert shown(record)[-1] == ("assistant", "Final: A is 42.")


def test_every_subagent_event_is_attributed(session: Session) -> None:
    record = session.turn("subagent")
    events = record["events"]
    begin = types(record).index("SUBAGENT_STARTED")
    end = len(events) - 1 - types(record)[::-1].index("SUBAGENT_FINISHED")

    inside = [e for e in events[begin:end] if not e["type"].startswith("SUBAGENT_")]
    assert inside
    assert all("subagentRunId" in e for e in inside)
    assert all("subagentRunId" not in e for e in events[:begin] + events[end + 1 :])


def test_a_subagents_voided_text_is_marked_and_replaced(session: Session) -> None:
    """A sub-agent's messages are not history: its text_reset ends the voided message with
    metadata saying so, and the retried text follows in a new one; the run goes on."""
    record = session.turn("subagent-cut")
    [started] = of(record, "SUBAGENT_STARTED")
    inner = [m for m in record["messages"] if m.get("subagentRunId") == started["subagentRunId"]]

    assert len(session.asked("Cut me")) == 2
    voided, retried = inner
    assert ANSWER.startswith(voided["content"])
    assert voided["content"] != ANSWER
    assert "voided" in voided["metadata"]["agentloop"]
    assert (retried["content"], retried.get("metadata")) == (OTHER, None)
    assert record["finished"]["outcome"] == "success"
    assert shown(record)[-1] == ("assistant", "Done.")


def test_subagent_messages_stay_out_of_the_next_turns_history(session: Session) -> None:
    [follow_up] = [r for r in session.asked("subagent") if r.messages[-1]["content"] == "thanks"]

    assert [m["role"] for m in follow_up.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert follow_up.messages[-2] == {"role": "assistant", "content": "Final: A is 42."}
    assert shown(session.turn("subagent", 1))[-1] == ("assistant", "You're welcome.")


def test_a_limit_ends_in_run_finished_with_its_notice(session: Session) -> None:
    record = session.turn("limit")
    done = session.finished["limit-0"]

    assert record["result"]["stop_reason"] == "max_iterations"
    [notice] = [e for e in of(record, "CUSTOM") if e["name"] == "agentloop.notice"]
    assert notice["value"]["code"] == "max_iterations"
    assert shown(record)[-1] == ("assistant", done.text)
    assert done.text.startswith("What I have so far.")
    assert done.text.endswith(notice["value"]["message"])


def test_a_provider_error_is_run_error(session: Session) -> None:
    record = session.turn("provider-error")

    assert types(record)[-1] == "RUN_ERROR"
    assert "RUN_FINISHED" not in types(record)
    [error] = record["runErrors"]
    assert error["code"] == "provider"
    assert "the prompt was refused upstream" in error["message"]
    assert session.finished["provider-error-0"].stop_reason == "error"


def test_a_retried_turn_that_repeats_itself_shows_once(session: Session) -> None:
    record = session.turn("cut-same")

    assert len(session.asked("cut-same")) == 2, "the cut turn was retried"
    assert shown(record) == [("user", "cut-same"), ("assistant", ANSWER)]
    assert record["finished"]["outcome"] == "success"
    assert session.finished["cut-same-0"].text == ANSWER


def test_a_retried_turn_that_departs_ends_in_run_error(session: Session) -> None:
    record = session.turn("cut-other")

    [error] = record["runErrors"]
    assert error["code"] == "stream_cut"
    [(role, text)] = shown(record)[1:]
    assert role == "assistant"
    assert text, "the cut attempt's text was sent"
    assert ANSWER.startswith(text), "only what was sent, once; nothing of the other text"
    assert "cut-other-0" in session.finished, "the run still ended and was recorded"


def test_abort_run_cancels_the_run(session: Session) -> None:
    record = session.turn("abort")

    assert "RUN_FINISHED" not in types(record)
    assert [e["code"] for e in record["runErrors"]] == ["abort"]  # the client's own
    done = session.finished["abort-0"]
    assert done.stop_reason == "cancelled"
    assert done.iterations == 1
    assert len(session.asked("abort")) == 1, "no model call after the client left"


def test_client_tools_are_refused_to_the_client(session: Session) -> None:
    record = session.turn("client-tools")

    assert record["thrown"]["status"] == 422
    assert "client-side tools are not supported" in record["thrown"]["message"]
    assert session.asked("client-tools") == []


# -- refusals, before anything streams ----------------------------------------------------------


def body(**changes: Any) -> JSON:
    raw: JSON = {
        "threadId": "t",
        "runId": "r",
        "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    raw.update(changes)
    return raw


def user(content: Any, **extra: Any) -> JSON:
    return {"id": "u1", "role": "user", "content": content, **extra}


REFUSALS: dict[str, tuple[Any, int, str | None, str]] = {
    "missing threadId": (
        {k: v for k, v in body().items() if k != "threadId"},
        422,
        "threadId",
        "Field required",
    ),
    "messages not a list": (body(messages={"role": "user"}), 422, "messages", "valid list"),
    "unknown role": (
        body(messages=[{"id": "x", "role": "robot", "content": "hi"}]),
        422,
        "messages.0",
        "robot",
    ),
    "message without id": (
        body(messages=[{"role": "user", "content": "hi"}]),
        422,
        "messages.0.user.id",
        "required",
    ),
    "reasoning role": (
        body(messages=[{"id": "x", "role": "reasoning", "content": "hm"}, user("hi")]),
        422,
        "messages.0.role",
        "'reasoning' has no place",
    ),
    "image part": (
        body(
            messages=[
                user([{"type": "image", "source": {"type": "url", "value": "http://x/i.png"}}])
            ]
        ),
        422,
        "messages.0.content.0",
        "text only",
    ),
    "client tools": (
        body(tools=[{"name": "confirm", "description": "Ask"}]),
        422,
        "tools",
        "client-side tools",
    ),
    "resume without a decision": (
        body(resume=[{"interruptId": "i", "status": "resolved"}]),
        422,
        "resume.0.payload.approved",
        "a resolved approval needs payload",
    ),
    "unknown server tool": (
        body(forwardedProps={"agentloop": {"tools": ["nope"]}}),
        422,
        "forwardedProps.agentloop.tools",
        "unknown tool(s) ['nope']",
    ),
    "disallowed model": (
        body(forwardedProps={"agentloop": {"model": "nope"}}),
        422,
        "forwardedProps.agentloop.model",
        "nope",
    ),
    "unknown option": (
        body(forwardedProps={"agentloop": {"temperature": 2}}),
        422,
        "forwardedProps.agentloop.temperature",
        "Extra inputs",
    ),
    "zero iterations": (
        body(forwardedProps={"agentloop": {"max_iterations": 0}}),
        422,
        "forwardedProps.agentloop.max_iterations",
        "greater than or equal to 1",
    ),
    "no messages": (body(messages=[]), 422, "messages", "needs the user's message"),
    "ends with the assistant": (
        body(messages=[user("hi"), {"id": "a", "role": "assistant", "content": "hello"}]),
        422,
        "messages",
        "messages: the last message must be the user's",
    ),
    "only sub-agent messages": (
        body(messages=[user("hi", subagentRunId="s1")]),
        422,
        "messages",
        "needs the user's message",
    ),
    "result for an unknown call": (
        body(
            messages=[{"id": "t", "role": "tool", "toolCallId": "c1", "content": "x"}, user("hi")]
        ),
        422,
        "messages",
        "messages[0]: tool result for unknown or already answered tool call id 'c1'",
    ),
    "huge context": (
        body(context=[{"description": "d", "value": "x" * 100_001}]),
        413,
        "context",
        "the limit is",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_bad_input_is_a_precise_4xx(session: Session, case: str) -> None:
    raw, status, param, fragment = REFUSALS[case]

    response = httpx.post(f"{session.url}/ag-ui", json=raw, headers=AUTH)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert fragment in error["message"]


def test_malformed_json_and_missing_auth(session: Session) -> None:
    content = {**AUTH, "content-type": "application/json"}
    malformed = httpx.post(f"{session.url}/ag-ui", content=b'{"threadId": ', headers=content)
    anonymous = httpx.post(f"{session.url}/ag-ui", json=body())

    assert (malformed.status_code, malformed.json()["error"]["type"]) == (400, "invalid_json")
    assert anonymous.status_code == 401
