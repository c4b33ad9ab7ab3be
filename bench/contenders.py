"""Every contender behind one interface: build once, then run a task, streaming its text.

Each adapter imports its framework only in :meth:`Contender.start`, so a process that runs
one contender holds that contender's modules and nothing else. Each is set up the way its
documentation recommends for an OpenAI-compatible server, over Chat Completions (never
OpenAI's Responses API), with one client reused across runs, tracing and console output off,
and the same system prompt (agentloop's default) and tools; each streams, as a chat agent
must. Where a framework's object is stateful per conversation, a new one is made per run,
as a request handler would.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import IO, Any

from bench import tasks

TextSink = Callable[[str], None]
API_KEY = "bench-key"
OPENAI_MODEL = "gpt-4o-mini"
GROQ_MODEL = "llama-3.3-70b-versatile"


def _devnull() -> IO[str]:
    return open(os.devnull, "w")  # the caller closes it


def _sink(on_text: TextSink | None) -> TextSink:
    return on_text if on_text is not None else (lambda _: None)


class Contender:
    key = ""
    label = ""
    provider = "openai"
    """Which bare-SDK floor this contender is compared with."""
    imports = ""
    """What one agent run needs imported (the cold-start figure times exactly this)."""
    note = ""

    async def start(self, base_url: str) -> None:
        """Import the framework and build what every run reuses."""

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        """Run ``task`` to the end; returns the final answer text."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Release clients."""


# -- the floors ------------------------------------------------------------------------------


class FloorOpenAI(Contender):
    key = "floor-openai"
    label = "bare openai SDK loop"
    provider = "openai"
    imports = "import asyncio, json\nfrom openai import AsyncOpenAI"
    note = "bench/floor_openai.py"

    async def start(self, base_url: str) -> None:
        from bench import floor_openai

        self.floor = floor_openai
        self.client = floor_openai.client(f"{base_url}/v1", API_KEY)

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        messages = [
            {"role": "system", "content": tasks.SYSTEM_PROMPT},
            {"role": "user", "content": tasks.prompt(task, run_id)},
        ]
        return await self.floor.run(
            self.client,
            OPENAI_MODEL,
            messages,
            tasks.openai_tool_definitions(task),
            tasks.ASYNC_TOOLS,
            on_text,
        )

    async def stop(self) -> None:
        await self.client.close()


class FloorGroq(FloorOpenAI):
    key = "floor-groq"
    label = "bare groq SDK loop"
    provider = "groq"
    imports = "import asyncio, json\nfrom groq import AsyncGroq"
    note = "bench/floor_groq.py"

    async def start(self, base_url: str) -> None:
        from bench import floor_groq

        self.floor = floor_groq  # type: ignore[assignment]
        self.client = floor_groq.client(base_url, API_KEY)  # type: ignore[assignment]

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        messages = [
            {"role": "system", "content": tasks.SYSTEM_PROMPT},
            {"role": "user", "content": tasks.prompt(task, run_id)},
        ]
        return await self.floor.run(
            self.client,  # type: ignore[arg-type]
            GROQ_MODEL,
            messages,
            tasks.openai_tool_definitions(task),
            tasks.ASYNC_TOOLS,
            on_text,
        )


# -- agentloop -------------------------------------------------------------------------------


class Agentloop(Contender):
    """``handle_chat`` in-process, as the chat app and the research worker call it."""

    key = "agentloop-groq"
    label = "agentloop (Groq provider)"
    provider = "groq"
    imports = (
        "from agentloop.chat import AgentSetup, ChatContext, handle_chat\n"
        "from agentloop.config import AgentConfig\n"
        "from agentloop.models import ChatRequest, UserMessage\n"
        "from agentloop.tools.base import tool\n"
        "import groq"
    )
    note = "handle_chat, default AgentConfig"
    compaction = True

    async def start(self, base_url: str) -> None:
        from agentloop.chat import AgentSetup, ChatContext, handle_chat
        from agentloop.config import AgentConfig
        from agentloop.events import Done, TextDelta
        from agentloop.models import ChatRequest, UserMessage
        from agentloop.tools.registry import ToolRegistry
        from bench.agentloop_tools import TOOLS

        os.environ.update(
            GROQ_BASE_URL=base_url,
            GROQ_API_KEY=API_KEY,
            OPENAI_BASE_URL=f"{base_url}/v1",
            OPENAI_API_KEY=API_KEY,
        )
        self.model = f"{self.provider}:{GROQ_MODEL if self.provider == 'groq' else OPENAI_MODEL}"
        # Built once, as the chat app builds its AgentSetup once per process.
        self.setup = AgentSetup(
            config=AgentConfig(compaction=self.compaction), tools=ToolRegistry(TOOLS)
        )
        self._types = (ChatContext, handle_chat, ChatRequest, UserMessage, Done, TextDelta)
        self.prompt_tokens = 0

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        chat_context, handle_chat, chat_request, user_message, done_type, text_type = self._types
        sink = _sink(on_text)
        request = chat_request(
            messages=[user_message(content=tasks.prompt(task, run_id))],
            model=self.model,
            tools=list(tasks.TOOL_NAMES.get(task, ())),
            max_iterations=20,
            token_budget=1_000_000,
        )
        context = chat_context(setup=self.setup)
        answer = ""
        async for event in handle_chat(request, context):
            if isinstance(event, text_type) and event.depth == 0:
                sink(event.text)
            elif isinstance(event, done_type) and event.depth == 0:
                answer = event.text
                self.prompt_tokens = event.usage.prompt_tokens
        return answer


class AgentloopOpenAI(Agentloop):
    key = "agentloop-openai"
    label = "agentloop (OpenAI provider)"
    provider = "openai"
    imports = Agentloop.imports.replace("import groq", "import openai")


class AgentloopNoCompaction(Agentloop):
    key = "agentloop-groq-full"
    label = "agentloop (Groq), compaction off"
    note = "AgentConfig(compaction=False)"
    compaction = False


class AgentloopApp(Contender):
    """The chat function's app, as Lambda runs it: uvicorn serving ``chat_app:app``.

    The worker reaches it over HTTP (``POST /chat``, SSE); the orchestrator starts it.
    Only the HTTP figures (cold start, streaming, memory) use it.
    """

    key = "agentloop-app"
    label = "agentloop chat app (uvicorn, /chat SSE, Groq)"
    provider = "groq"
    imports = "import chat_app\nimport groq"
    note = "functions/chat/chat_app.py under uvicorn, reached over loopback HTTP"

    async def start(self, base_url: str) -> None:
        from urllib.parse import urlsplit

        url = urlsplit(os.environ["BENCH_APP_URL"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        body = json.dumps(
            {
                "messages": [{"role": "user", "content": tasks.prompt(task, run_id)}],
                "tools": list(tasks.TOOL_NAMES.get(task, ())),
                "max_iterations": 20,
            }
        ).encode()
        answer, _ = await post_chat(self.host, self.port, body, on_text)
        return answer


async def post_chat(
    host: str, port: int, body: bytes, on_text: TextSink | None = None
) -> tuple[str, bytes]:
    """POST /chat over a bare socket (no client library in the way); ``on_text`` is called
    as soon as the bytes of the first ``text_delta`` frame arrive. Returns the ``done``
    event's text and the raw response."""
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST /chat HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()
    marker = b"event: text_delta"
    raw = bytearray()
    seen_text = False
    try:
        while chunk := await reader.read(65536):
            if not seen_text and marker in raw[-len(marker) :] + chunk:
                seen_text = True
                _sink(on_text)("")
            raw += chunk
    finally:
        writer.close()
    answer = ""
    for line in bytes(raw).split(b"\n"):
        if line.startswith(b"data: {") and b'"type":"done"' in line.replace(b" ", b""):
            event = json.loads(line[len(b"data: ") :])
            if event.get("depth", 0) == 0:
                answer = event["text"]
    return answer, bytes(raw)


# -- the frameworks --------------------------------------------------------------------------


class OpenAIAgents(Contender):
    key = "openai-agents"
    label = "openai-agents"
    imports = (
        "from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, "
        "set_tracing_disabled\nfrom openai import AsyncOpenAI"
    )
    note = "OpenAIChatCompletionsModel, Runner.run_streamed, tracing disabled"

    async def start(self, base_url: str) -> None:
        from agents import (
            Agent,
            OpenAIChatCompletionsModel,
            Runner,
            function_tool,
            set_tracing_disabled,
        )
        from openai import AsyncOpenAI
        from openai.types.responses import ResponseTextDeltaEvent

        set_tracing_disabled(True)
        self.client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key=API_KEY)
        model = OpenAIChatCompletionsModel(model=OPENAI_MODEL, openai_client=self.client)

        @function_tool(description_override=tasks.DESCRIPTIONS["lookup"])
        async def lookup(key: str) -> str:
            return tasks.lookup(key)

        @function_tool(description_override=tasks.DESCRIPTIONS["wait"])
        async def wait(label: str) -> str:
            return await tasks.wait(label)

        @function_tool(description_override=tasks.DESCRIPTIONS["fetch_doc"])
        async def fetch_doc(n: int) -> str:
            return tasks.fetch_doc(n)

        by_name = {"lookup": lookup, "wait": wait, "fetch_doc": fetch_doc}
        self.agents = {
            task: Agent(
                name="bench",
                instructions=tasks.SYSTEM_PROMPT,
                model=model,
                tools=[by_name[n] for n in tasks.TOOL_NAMES.get(task, ())],
            )
            for task in tasks.TASKS
        }
        self.runner = Runner
        self.delta_type = ResponseTextDeltaEvent

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        sink = _sink(on_text)
        result = self.runner.run_streamed(
            self.agents[task], tasks.prompt(task, run_id), max_turns=30
        )
        async for event in result.stream_events():
            if event.type == "raw_response_event" and isinstance(event.data, self.delta_type):
                sink(event.data.delta)
        return str(result.final_output)

    async def stop(self) -> None:
        await self.client.close()


class PydanticAI(Contender):
    key = "pydantic-ai"
    label = "pydantic-ai"
    imports = (
        "from pydantic_ai import Agent\nfrom pydantic_ai.models.openai import OpenAIChatModel\n"
        "from pydantic_ai.providers.openai import OpenAIProvider"
    )
    note = "OpenAIChatModel, Agent.run_stream_events"

    async def start(self, base_url: str) -> None:
        from openai import AsyncOpenAI
        from pydantic_ai import (
            Agent,
            AgentRunResultEvent,
            PartDeltaEvent,
            PartStartEvent,
            TextPart,
            TextPartDelta,
        )
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        self.client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key=API_KEY)
        model = OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=self.client))

        async def lookup(key: str) -> str:
            return tasks.lookup(key)

        async def wait(label: str) -> str:
            return await tasks.wait(label)

        async def fetch_doc(n: int) -> str:
            return tasks.fetch_doc(n)

        for fn in (lookup, wait, fetch_doc):
            fn.__doc__ = tasks.DESCRIPTIONS[fn.__name__]
        by_name = {"lookup": lookup, "wait": wait, "fetch_doc": fetch_doc}
        self.agents = {
            task: Agent(
                model,
                instructions=tasks.SYSTEM_PROMPT,
                tools=[by_name[n] for n in tasks.TOOL_NAMES.get(task, ())],
            )
            for task in tasks.TASKS
        }
        self.types = (AgentRunResultEvent, PartStartEvent, TextPart, PartDeltaEvent, TextPartDelta)

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        result_type, start_event, text_part, delta_event, text_delta = self.types
        sink = _sink(on_text)
        answer = ""
        async with self.agents[task].run_stream_events(tasks.prompt(task, run_id)) as events:
            async for event in events:
                if isinstance(event, start_event) and isinstance(event.part, text_part):
                    if event.part.content:  # a text part starts with its first chunk's text
                        sink(event.part.content)
                elif isinstance(event, delta_event) and isinstance(event.delta, text_delta):
                    sink(event.delta.content_delta)
                elif isinstance(event, result_type):
                    answer = str(event.result.output)
        return answer

    async def stop(self) -> None:
        await self.client.close()


class Smolagents(Contender):
    key = "smolagents"
    label = "smolagents (ToolCallingAgent)"
    imports = "from smolagents import OpenAIModel, ToolCallingAgent, tool"
    note = "ToolCallingAgent, OpenAIModel, stream_outputs=True; synchronous, tools in threads"

    async def start(self, base_url: str) -> None:
        from rich.console import Console
        from smolagents import (
            AgentLogger,
            ChatMessageStreamDelta,
            FinalAnswerStep,
            LogLevel,
            OpenAIModel,
            ToolCallingAgent,
            tool,
        )

        model = OpenAIModel(model_id=OPENAI_MODEL, api_base=f"{base_url}/v1", api_key=API_KEY)

        @tool
        def lookup(key: str) -> str:
            """Look up the number stored under a key.

            Args:
                key: Which value to look up.
            """
            return tasks.lookup(key)

        @tool
        def wait(label: str) -> str:
            """Wait for the named thing (takes a while) and report it.

            Args:
                label: What to wait for.
            """
            return tasks.wait_sync(label)

        @tool
        def fetch_doc(n: int) -> str:
            """Fetch one document by number.

            Args:
                n: The document's number.
            """
            return tasks.fetch_doc(n)

        by_name = {"lookup": lookup, "wait": wait, "fetch_doc": fetch_doc}
        self.devnull = _devnull()
        self.agents = {
            task: ToolCallingAgent(
                tools=[by_name[n] for n in tasks.TOOL_NAMES.get(task, ())],
                model=model,
                instructions=tasks.SYSTEM_PROMPT,
                stream_outputs=True,
                max_steps=30,
                # With stream_outputs, smolagents renders the stream on its console (rich Live)
                # whatever the log level: send it nowhere.
                logger=AgentLogger(LogLevel.OFF, console=Console(file=self.devnull)),
            )
            for task in tasks.TASKS
        }
        self.types = (ChatMessageStreamDelta, FinalAnswerStep)

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        # smolagents is synchronous: the run blocks this (otherwise idle) event loop.
        delta_type, final_type = self.types
        sink = _sink(on_text)
        answer = ""
        for event in self.agents[task].run(tasks.prompt(task, run_id), stream=True):
            if isinstance(event, delta_type) and event.content:
                sink(event.content)
            elif isinstance(event, final_type):
                answer = str(event.output)
        return answer

    async def stop(self) -> None:
        self.devnull.close()


class Strands(Contender):
    key = "strands-agents"
    label = "strands-agents"
    imports = "from strands import Agent, tool\nfrom strands.models.openai import OpenAIModel"
    note = "OpenAIModel with a shared AsyncOpenAI client, Agent.stream_async; one Agent per run"

    async def start(self, base_url: str) -> None:
        from openai import AsyncOpenAI
        from strands import Agent, tool
        from strands.models.openai import OpenAIModel

        self.client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key=API_KEY)
        self.model = OpenAIModel(client=self.client, model_id=OPENAI_MODEL)

        @tool(description=tasks.DESCRIPTIONS["lookup"])
        async def lookup(key: str) -> str:
            return tasks.lookup(key)

        @tool(description=tasks.DESCRIPTIONS["wait"])
        async def wait(label: str) -> str:
            return await tasks.wait(label)

        @tool(description=tasks.DESCRIPTIONS["fetch_doc"])
        async def fetch_doc(n: int) -> str:
            return tasks.fetch_doc(n)

        self.by_name = {"lookup": lookup, "wait": wait, "fetch_doc": fetch_doc}
        self.agent_type = Agent

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        sink = _sink(on_text)
        agent = self.agent_type(  # an Agent holds its conversation: one per request
            model=self.model,
            tools=[self.by_name[n] for n in tasks.TOOL_NAMES.get(task, ())],
            system_prompt=tasks.SYSTEM_PROMPT,
            callback_handler=None,
        )
        answer = ""
        async for event in agent.stream_async(tasks.prompt(task, run_id)):
            if "data" in event:
                sink(event["data"])
            elif "result" in event:
                answer = str(event["result"]).strip()
        return answer

    async def stop(self) -> None:
        await self.client.close()


class LangGraph(Contender):
    key = "langgraph"
    label = "langgraph (create_react_agent + ChatOpenAI)"
    imports = (
        "from langgraph.prebuilt import create_react_agent\n"
        "from langchain_openai import ChatOpenAI\nfrom langchain_core.tools import tool"
    )
    note = "prebuilt ReAct agent, ChatOpenAI(streaming=True), astream messages + values"

    async def start(self, base_url: str) -> None:
        import warnings

        from langchain_core.messages import AIMessageChunk
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI
        from langgraph.prebuilt import create_react_agent

        llm = ChatOpenAI(
            model=OPENAI_MODEL,
            base_url=f"{base_url}/v1",
            api_key=API_KEY,  # type: ignore[arg-type]
            streaming=True,
            use_responses_api=False,
        )

        @tool(description=tasks.DESCRIPTIONS["lookup"])
        async def lookup(key: str) -> str:
            return tasks.lookup(key)

        @tool(description=tasks.DESCRIPTIONS["wait"])
        async def wait(label: str) -> str:
            return await tasks.wait(label)

        @tool(description=tasks.DESCRIPTIONS["fetch_doc"])
        async def fetch_doc(n: int) -> str:
            return tasks.fetch_doc(n)

        by_name = {"lookup": lookup, "wait": wait, "fetch_doc": fetch_doc}
        with warnings.catch_warnings():  # create_react_agent is deprecated for langchain's
            warnings.simplefilter("ignore")
            self.graphs = {
                task: create_react_agent(
                    llm,
                    [by_name[n] for n in tasks.TOOL_NAMES.get(task, ())],
                    prompt=tasks.SYSTEM_PROMPT,
                )
                for task in tasks.TASKS
            }
        self.chunk_type = AIMessageChunk

    async def run(self, task: str, run_id: str, on_text: TextSink | None = None) -> str:
        sink = _sink(on_text)
        state: dict[str, Any] = {}
        async for mode, data in self.graphs[task].astream(
            {"messages": [("user", tasks.prompt(task, run_id))]},
            config={"recursion_limit": 100},
            stream_mode=["messages", "values"],
        ):
            if mode == "messages":
                message, _ = data
                content = getattr(message, "content", None)
                if isinstance(message, self.chunk_type) and isinstance(content, str) and content:
                    sink(content)
            else:
                state = data
        return str(state["messages"][-1].content)


CONTENDERS: dict[str, type[Contender]] = {
    c.key: c
    for c in (
        FloorGroq,
        FloorOpenAI,
        Agentloop,
        AgentloopOpenAI,
        AgentloopNoCompaction,
        AgentloopApp,
        OpenAIAgents,
        PydanticAI,
        Smolagents,
        Strands,
        LangGraph,
    )
}
PEERS = ("openai-agents", "pydantic-ai", "smolagents", "strands-agents", "langgraph")
IN_PROCESS = ("floor-groq", "floor-openai", "agentloop-groq", "agentloop-openai", *PEERS)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


async def _smoke(key: str, base_url: str) -> None:  # python -m bench.contenders KEY URL
    contender = CONTENDERS[key]()
    await contender.start(base_url)
    for task in ("loop", "parallel", "stream"):
        answer = await contender.run(task, f"smoke{task}")
        ok = answer == tasks.expected_answer(task)
        print(key, task, "ok" if ok else f"WRONG {answer!r}")
    await contender.stop()


if __name__ == "__main__":
    import sys

    asyncio.run(_smoke(sys.argv[1], sys.argv[2]))
