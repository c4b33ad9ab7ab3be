"""The OpenAI faces' answers: the stream both follow (:class:`OpenAIStream`), Chat
Completions' chunks, and the non-streamed ``chat.completion``."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from agentloop.events import Done, ErrorEvent, Event, ToolCallResult, ToolCallStart
from agentloop.faces.openai.errors import event_error, no_client_retry, run_error, stream_cut_error
from agentloop.faces.openai.request import CompletionRequest
from agentloop.faces.outcome import NO_ANSWER, Ending, Outcome, outcome
from agentloop.faces.stream import FaceStream
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import PendingCall, Usage

FinishReason = Literal["stop", "length", "tool_calls"]

FINISH_REASONS: dict[Outcome, FinishReason] = {
    Outcome.ANSWERED: "stop",
    Outcome.CUT_SHORT: "length",
    Outcome.AWAITS_CLIENT_TOOLS: "tool_calls",
}
"""Outcomes a completion finishes with. A limit cut the answer short, which is what OpenAI's
"length" says; a pause for the client's tools is OpenAI's own "tool_calls". The others have
no answer and end in an error object (:func:`run_error`)."""


_DONE_FRAME = b"data: [DONE]\n\n"


def _usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def tool_line(event: ToolCallStart | ToolCallResult) -> str:
    if isinstance(event, ToolCallStart):
        return f"\n\n> calling `{event.name}` {event.arguments}\n\n"
    status = "ok" if event.ok else "failed"
    return f"> `{event.name}` {status} in {event.duration_ms:.0f} ms\n\n"


class OpenAIStream(FaceStream[bytes]):
    """How both OpenAI faces' streams (Chat Completions, Responses) follow a run: text as it
    comes (:class:`FaceStream` honours ``text_reset`` and cuts), tool lines with
    ``show_tools``, and the run's first error, which ends the stream at once (the apology the
    loop writes after it is not an answer). Each face frames them its own way."""

    retry_advice = "a retry, or a non-streamed request, will get the whole answer"

    def __init__(self, cancel: CancelToken | None, show_tools: bool) -> None:
        super().__init__(cancel)
        self.show_tools = show_tools

    def encode(self, chunk: bytes) -> bytes:
        return chunk

    def fail(self, error: HttpError) -> list[bytes]:
        """End the stream with ``error`` (the face's error frames)."""
        raise NotImplementedError

    def on_error(self, event: ErrorEvent) -> list[bytes]:
        return self.fail(event_error(event))

    def on_cut(self, message: str) -> list[bytes]:
        return self.fail(stream_cut_error(message))

    def on_close(self) -> list[bytes]:
        if self.ended:
            return []
        return self.fail(no_client_retry(HttpError(500, "internal_error", NO_ANSWER)))

    def on_tool_start(self, event: ToolCallStart) -> list[bytes]:
        return self._tool_line(event)

    def on_tool_result(self, event: ToolCallResult) -> list[bytes]:
        return self._tool_line(event)

    def _tool_line(self, event: ToolCallStart | ToolCallResult) -> list[bytes]:
        if not self.show_tools:
            return []
        return self.on_text(tool_line(event))  # a line of the answer's text


class CompletionStream(OpenAIStream):
    """Turns agent events into ``chat.completion.chunk`` SSE lines.

    A run that ends without an answer ends the stream with one error object, the same
    one the non-streamed face answers with (the openai SDK raises ``APIError`` on it),
    and no ``finish_reason``. ``cancel`` stops a run whose answer can no longer reach the
    client correctly (a cut stream that was not repeated).
    """

    def __init__(
        self,
        request: CompletionRequest,
        completion_id: str,
        model: str,
        cancel: CancelToken | None = None,
    ) -> None:
        super().__init__(cancel, request.agentloop.show_tools)
        self.request = request
        self.id = completion_id
        self.created = int(time.time())
        self.model = model

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._data({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def _data(self, fields: dict[str, Any]) -> bytes:
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            **fields,
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    def on_open(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def fail(self, error: HttpError) -> list[bytes]:
        self.ended = True
        return [f"data: {json.dumps(error.body())}\n\n".encode(), _DONE_FRAME]

    def on_text(self, text: str) -> list[bytes]:
        return [self._chunk({"content": text})]

    def on_finish(self, ending: Ending) -> list[bytes]:
        finish = FINISH_REASONS.get(ending.outcome)
        if finish is None:
            return self.fail(run_error(ending))
        done = ending.done
        if finish == "tool_calls":
            calls = client_calls(done.pending)
            frames = [
                self._chunk({"tool_calls": [{"index": index, **tool_call}]})
                for index, tool_call in enumerate(calls)
            ]
            frames.append(self._chunk({"agentloop": {"resume": done.resume}}, finish))
        else:
            frames = [self._chunk({}, finish)]
        options = self.request.stream_options
        if options is not None and options.include_usage:
            frames.append(self._data({"choices": [], "usage": _usage_json(done.usage)}))
        self.ended = True
        return [*frames, _DONE_FRAME]


def client_calls(pending: list[PendingCall]) -> list[dict[str, Any]]:
    """A paused run's calls of the client's tools, as OpenAI's ``tool_calls``."""
    return [
        {
            "id": p.call_id,
            "type": "function",
            "function": {"name": p.name, "arguments": p.arguments},
        }
        for p in pending
        if p.kind == "client"
    ]


def completion_body(
    ending: Ending, completion_id: str, model: str, tool_lines: list[str]
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` for a run that ended with an answer, or paused
    for the client's tools (their calls, and the token that continues the run)."""
    done = ending.done
    content = "".join(tool_lines) + done.text
    message: dict[str, Any] = {"role": "assistant", "content": content}
    finish = FINISH_REASONS.get(ending.outcome)
    if finish is None:
        raise run_error(ending)
    if finish == "tool_calls":
        message["content"] = content or None  # as OpenAI answers a turn of calls only
        message["tool_calls"] = client_calls(done.pending)
        message["agentloop"] = {"resume": done.resume}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage_json(done.usage),
    }


async def collect_run(events: AsyncIterator[Event], show_tools: bool) -> tuple[Ending, list[str]]:
    """Run to the end for a non-streamed answer (both OpenAI faces): the run's ending (its
    top-level ``done`` and first error), and the tool lines ``show_tools`` asks for."""
    tool_lines: list[str] = []
    error: ErrorEvent | None = None
    async for event in events:
        if event.depth != 0:
            continue
        if show_tools and isinstance(event, ToolCallStart | ToolCallResult):
            tool_lines.append(tool_line(event))
        elif isinstance(event, ErrorEvent):
            error = error or event
        elif isinstance(event, Done):
            return outcome(event, error), tool_lines
    raise AssertionError("handle_chat always ends with done")


async def collect_completion(
    request: CompletionRequest, events: AsyncIterator[Event], completion_id: str, model: str
) -> dict[str, Any]:
    """Run to the end and answer with one ``chat.completion`` object.

    The answer is ``done.text``, which already leaves out text a ``text_reset`` voided.
    A run without an answer (failed, cancelled, paused for approval) raises
    :class:`HttpError`: a non-streamed client has no other way to tell an apology from an
    answer.
    """
    ending, tool_lines = await collect_run(events, request.agentloop.show_tools)
    return completion_body(ending, completion_id, model, tool_lines)
