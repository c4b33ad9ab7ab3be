"""The terminal client: ``python -m agentloop chat "question"`` and ``... schema``.

Answer text goes to stdout as it streams; tool activity and the closing summary go
to stderr, so ``> answer.md`` captures only the answer.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from agentloop import limits_cli, secret_cli
from agentloop.chat import AgentSetup, ChatContext, handle_chat
from agentloop.config import AgentConfig, ConfigurationError
from agentloop.defaults import default_registry
from agentloop.events import (
    Done,
    ErrorEvent,
    Event,
    Notice,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
    event_schema_text,
)
from agentloop.models import ChatRequest, UserMessage


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agentloop")
    commands = parser.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat", help="ask one question and stream the answer")
    chat.add_argument("question")
    chat.add_argument(
        "--model",
        help="provider:model (default: AGENTLOOP_DEFAULT_MODEL, else chosen from the keys set)",
    )
    chat.add_argument("--tools", help="comma-separated tool names (default: the server's)")
    chat.add_argument("--max-iterations", type=int)
    chat.add_argument("--token-budget", type=int)
    chat.add_argument("--max-cost-usd", type=float, help="dollars the request may spend")
    commands.add_parser("schema", help="print the JSON Schema of the stream events")
    secret_cli.add_commands(commands)  # `secret ...` and `token`: the deployed secret
    limits_cli.add_commands(commands)  # `limits show|set|clear`: per-principal limits
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "schema":
        sys.stdout.write(event_schema_text())
        return 0
    if args.command in ("secret", "token"):
        return secret_cli.run(args)
    if args.command == "limits":
        return limits_cli.run(args)
    if not args.question.strip():
        # Checked here, before any key or model is looked at: a blank question (``make chat``
        # without Q) would otherwise be sent, and paid for, as an empty user message.
        print(
            'error: the question is empty: python -m agentloop chat "your question"',
            file=sys.stderr,
        )
        return 2
    try:
        config = AgentConfig.from_env()
        request = ChatRequest(
            messages=[UserMessage(content=args.question)],
            model=args.model,
            tools=args.tools.split(",") if args.tools else None,
            max_iterations=args.max_iterations,
            token_budget=args.token_budget,
            max_cost_usd=args.max_cost_usd,
        )
    except (ConfigurationError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    context = ChatContext(setup=AgentSetup(config=config, tools=default_registry()))
    done = asyncio.run(_stream(request, context, sys.stdout, sys.stderr))
    return 0 if done.stop_reason != "error" else 1


async def _stream(request: ChatRequest, context: ChatContext, out: TextIO, err: TextIO) -> Done:
    done: Done | None = None
    async for event in handle_chat(request, context):
        _show(event, out, err)
        if isinstance(event, Done):
            done = event
    assert done is not None
    return done


def _show(event: Event, out: TextIO, err: TextIO) -> None:
    indent = "  " * event.depth
    if isinstance(event, TextDelta):
        out.write(event.text)
        out.flush()
    elif isinstance(event, ToolCallStart):
        err.write(f"\n{indent}-> {event.name} {event.arguments}\n")
    elif isinstance(event, ToolCallResult):
        status = "ok" if event.ok else "failed"
        err.write(f"{indent}<- {event.name} {status} in {event.duration_ms:.0f} ms\n")
    elif isinstance(event, Notice):
        err.write(f"{indent}[{event.code}] {event.message}\n")
    elif isinstance(event, ErrorEvent):
        err.write(f"{indent}error ({event.code}): {event.message}\n")
    elif isinstance(event, Done) and event.depth == 0:
        usage = event.usage
        out.write("\n")
        err.write(
            f"[{event.stop_reason}] {event.iterations} iteration(s), "
            f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens\n"
        )
