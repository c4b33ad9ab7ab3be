"""Traces: OpenTelemetry GenAI spans built from a request's events (agentloop.tracing).

The span tree is read from the OpenTelemetry SDK's in-memory exporter; the export over
OTLP/HTTP and the "free when off" promise are checked in fresh processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentloop import tracing
from agentloop.ask_llm import ask_llm_tool
from agentloop.chat import AgentSetup, ChatContext
from agentloop.events import ErrorEvent, SubagentStart, ToolCallStart, UsageReport
from agentloop.tools.registry import ToolRegistry
from tests.fakes.loopback import LoopbackServer
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import ROOT, TEST_CONFIG, run_chat
from tests.sample_tools import echo

TOP = "Compare the two answers."
SUB = "What is A?"
OPENAI_MODEL = "openai:gpt-4o-mini"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)


def asked(req: RecordedRequest) -> str:
    return str(next(m["content"] for m in req.messages if m["role"] == "user"))


def tool_rounds(req: RecordedRequest) -> int:
    return sum(m["role"] == "tool" for m in req.messages)


def scripted_run(req: RecordedRequest) -> Reply:
    """Top level: ask_llm and echo at once, then the provider refuses; the sub-agent: echo,
    then its answer."""
    if asked(req) == SUB:
        if not tool_rounds(req):
            return Reply(tool_calls=[call("echo", text="A=42")], usage=(20, 5))
        return Reply(text="A is 42.", usage=(30, 4))
    if not tool_rounds(req):
        return Reply(
            tool_calls=[call("ask_llm", query=SUB), call("echo", text="hi")], usage=(50, 10)
        )
    return Reply(status=401)


def by_name(finished: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def parent_of(span: ReadableSpan, finished: list[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    [parent] = [s for s in finished if s.context.span_id == span.parent.span_id]
    return parent


async def test_span_tree_of_a_run_with_a_tool_a_subagent_and_a_provider_error(
    llm: ScriptedLLM, model: str, spans: InMemorySpanExporter
) -> None:
    llm.respond_with(scripted_run)
    provider, name = model.split(":")
    context = ChatContext(
        setup=AgentSetup(config=TEST_CONFIG, tools=ToolRegistry([ask_llm_tool(), echo])),
        request_id="req-19",
    )

    result = await run_chat(TOP, model=model, tools=[ask_llm_tool(), echo], context=context)

    assert result.done.stop_reason == "error"
    finished = list(spans.get_finished_spans())
    assert all(s.attributes["agentloop.request_id"] == "req-19" for s in finished)
    assert all(s.end_time is not None for s in finished)

    # The top-level run: the root, failed with the provider's error.
    [top] = [s for s in finished if s.parent is None]
    assert top.name == "invoke_agent agentloop"
    assert top.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert top.attributes["gen_ai.agent.name"] == "agentloop"
    assert top.attributes["gen_ai.provider.name"] == provider
    assert top.attributes["gen_ai.request.model"] == name
    assert top.attributes["agentloop.run_id"] == result.done.run_id
    assert top.attributes["agentloop.stop_reason"] == "error"
    assert top.status.status_code is StatusCode.ERROR
    assert top.attributes["error.type"] == "provider"
    assert top.attributes["gen_ai.usage.input_tokens"] == result.done.usage.prompt_tokens
    assert top.attributes["gen_ai.usage.output_tokens"] == result.done.usage.completion_tokens

    # Its model calls: one that asked for two tools, one the provider refused.
    top_chats = [s for s in by_name(finished, f"chat {name}") if parent_of(s, finished) is top]
    first, failed = sorted(top_chats, key=lambda s: s.start_time or 0)
    [first_usage] = [e for e in result.of(UsageReport) if e.depth == 0]
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == name
    assert first.attributes["gen_ai.response.model"] == name
    assert first.attributes["gen_ai.usage.input_tokens"] == 50
    assert first.attributes["gen_ai.usage.output_tokens"] == 10
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first_usage.finish_reason == "tool_calls"
    assert first.status.status_code is StatusCode.UNSET
    [error] = result.of(ErrorEvent)
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "provider"
    assert failed.status.description == error.message
    assert "gen_ai.usage.input_tokens" not in failed.attributes

    # Its tool calls, the ask_llm one holding the sub-agent's run.
    calls = {e.name: e.call_id for e in result.of(ToolCallStart) if e.depth == 0}
    [ask] = by_name(finished, "execute_tool ask_llm")
    top_echo = [s for s in by_name(finished, "execute_tool echo") if parent_of(s, finished) is top]
    assert parent_of(ask, finished) is top
    assert len(top_echo) == 1
    assert ask.attributes["gen_ai.tool.call.id"] == calls["ask_llm"]
    assert top_echo[0].attributes["gen_ai.tool.call.id"] == calls["echo"]
    assert ask.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ask.attributes["gen_ai.tool.name"] == "ask_llm"
    assert ask.attributes["gen_ai.tool.type"] == "function"

    [start] = result.of(SubagentStart)
    [sub] = [s for s in by_name(finished, "invoke_agent agentloop") if s is not top]
    assert parent_of(sub, finished) is ask
    assert sub.attributes["agentloop.run_id"] == start.run_id
    assert sub.attributes["agentloop.depth"] == 1
    assert sub.attributes["agentloop.parent_call_id"] == calls["ask_llm"]
    assert sub.attributes["agentloop.stop_reason"] == "completed"
    assert sub.attributes["gen_ai.usage.input_tokens"] == 50
    assert sub.status.status_code is StatusCode.UNSET
    children = sorted(
        (s for s in finished if parent_of(s, finished) is sub), key=lambda s: s.start_time or 0
    )
    assert [s.name for s in children] == [f"chat {name}", "execute_tool echo", f"chat {name}"]
    assert [s.attributes.get("gen_ai.usage.output_tokens") for s in children] == [5, None, 4]
    assert children[2].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert len(finished) == 1 + 2 + 2 + 1 + 3

    # No message content unless the operator asks for it.
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    assert not any(content_keys & set(s.attributes or {}) for s in finished)


@pytest.mark.usefixtures("provider_env")
async def test_content_is_recorded_only_when_turned_on(
    llm: ScriptedLLM, spans: InMemorySpanExporter
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.install(provider, content=True)
    llm.script(
        Reply(text="Let me check.", tool_calls=[call("echo", text="secret-ish")]),
        Reply(text="It says secret-ish."),
    )

    result = await run_chat(TOP, model=OPENAI_MODEL, tools=[echo])

    finished = list(spans.get_finished_spans())
    [top] = [s for s in finished if s.parent is None]
    sent = json.loads(str(top.attributes["gen_ai.input.messages"]))
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": TOP}]}]
    answer = json.loads(str(top.attributes["gen_ai.output.messages"]))
    assert answer[0]["parts"][0]["content"] == result.done.text == "It says secret-ish."
    [tool] = by_name(finished, "execute_tool echo")
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"text": "secret-ish"}
    assert "secret-ish" in str(tool.attributes["gen_ai.tool.call.result"])
    chats = sorted(by_name(finished, "chat gpt-4o-mini"), key=lambda s: s.start_time or 0)
    outputs = [json.loads(str(s.attributes["gen_ai.output.messages"])) for s in chats]
    assert [o[0]["parts"][0]["content"] for o in outputs] == ["Let me check.", result.done.text]
    assert [o[0]["finish_reason"] for o in outputs] == ["tool_calls", "stop"]


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"AGENTLOOP_TRACING": "on"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "AGENTLOOP_TRACING": "off"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, False),
    ],
)
def test_when_tracing_is_on(env: dict[str, str], on: bool) -> None:
    assert tracing.tracing_enabled(env) is on


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"AGENTLOOP_TRACE_CONTENT": "on"}, True),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}, True),
        ({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"}, False),
    ],
)
def test_when_content_is_recorded(env: dict[str, str], on: bool) -> None:
    assert tracing.content_enabled(env) is on


# A fresh process: the chat app and a whole run (with a tool) as a deployment runs them.
RUN_ONE = """
import asyncio, json, sys
if sys.argv[2] == "no-otel":  # as if the tracing extra were not installed
    sys.modules["opentelemetry"] = None
import chat_app  # the chat function's app, as Lambda imports it
from agentloop.chat import AgentSetup, ChatContext, collect
from agentloop.config import AgentConfig
from agentloop.models import ChatRequest, UserMessage
from tests.sample_tools import echo
from agentloop.tools.registry import ToolRegistry

request = ChatRequest(messages=[UserMessage(content="Hi")], model=sys.argv[1], tools=["echo"])
setup = AgentSetup(config=AgentConfig(), tools=ToolRegistry([echo]))
events, done = asyncio.run(collect(request, ChatContext(setup=setup, request_id="r-1")))
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
print(json.dumps({"text": done.text, "opentelemetry": loaded}))
"""


def run_one(env: dict[str, str], variant: str = "") -> dict[str, object]:
    paths = [ROOT / "layers/agent", ROOT / "functions/chat", ROOT]
    env = env | {"PYTHONPATH": os.pathsep.join(str(p) for p in paths)}
    proc = subprocess.run(
        [sys.executable, "-c", RUN_ONE, OPENAI_MODEL, variant],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(result, dict)
    result["stderr"] = proc.stderr
    return result


def otel_free_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "AGENTLOOP_TRAC", "AGENTLOOP_TRACE"))
    }


@pytest.mark.usefixtures("provider_env")
def test_off_by_default_and_nothing_of_opentelemetry_is_imported(llm: ScriptedLLM) -> None:
    llm.script(Reply(tool_calls=[call("echo", text="x")]), Reply(text="Done."))

    result = run_one(otel_free_env())

    assert (result["text"], result["opentelemetry"]) == ("Done.", [])
    assert len(llm.requests) == 2, "the run really made its model calls"


@pytest.mark.usefixtures("provider_env")
def test_on_exports_over_otlp_http_to_the_configured_endpoint(llm: ScriptedLLM) -> None:
    received: list[ExportTraceServiceRequest] = []

    async def traces(request: Request) -> Response:
        body = ExportTraceServiceRequest()
        body.ParseFromString(await request.body())
        received.append(body)
        return Response(status_code=200)

    collector = LoopbackServer(Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])]))
    llm.script(Reply(tool_calls=[call("echo", text="x")], usage=(12, 3)), Reply(text="Done."))
    with collector:
        env = otel_free_env() | {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            "OTEL_SERVICE_NAME": "agentloop-test",
        }
        result = run_one(env)

    assert result["text"] == "Done."
    assert "opentelemetry.sdk.trace" in str(result["opentelemetry"])
    resource_spans = [rs for body in received for rs in body.resource_spans]
    service = {
        a.value.string_value
        for rs in resource_spans
        for a in rs.resource.attributes
        if a.key == "service.name"
    }
    assert service == {"agentloop-test"}
    exported = [s for rs in resource_spans for ss in rs.scope_spans for s in ss.spans]
    names = sorted(s.name for s in exported)
    assert names == [
        "chat gpt-4o-mini",
        "chat gpt-4o-mini",
        "execute_tool echo",
        "invoke_agent agentloop",
    ]
    [top] = [s for s in exported if s.name == "invoke_agent agentloop"]
    assert all(s.trace_id == top.trace_id for s in exported)
    assert all(s.parent_span_id == top.span_id for s in exported if s is not top)
    request_ids = {
        a.value.string_value
        for s in exported
        for a in s.attributes
        if a.key == "agentloop.request_id"
    }
    assert request_ids == {"r-1"}


@pytest.mark.usefixtures("provider_env")
def test_on_without_the_packages_runs_untraced_and_says_why(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="Done."))

    result = run_one(otel_free_env() | {"AGENTLOOP_TRACING": "on"}, "no-otel")

    assert result["text"] == "Done."
    assert "pip install agentloop[tracing]" in str(result["stderr"])
