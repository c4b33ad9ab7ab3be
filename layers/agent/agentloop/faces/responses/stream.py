"""The Responses API's answers: the ``response`` object, its streamed events, and the
non-streamed answer."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from agentloop.events import Event, FileMade, UsageReport
from agentloop.faces.openai.errors import run_error
from agentloop.faces.openai.stream import OpenAIStream, collect_run
from agentloop.faces.outcome import Ending, Outcome
from agentloop.faces.responses.request import ResponsesRequest
from agentloop.http_api import HttpError
from agentloop.limits import CancelToken
from agentloop.models import Usage

ResponseStatus = Literal["completed", "incomplete", "failed", "in_progress"]

STATUSES: dict[Outcome, ResponseStatus] = {
    Outcome.ANSWERED: "completed",
    Outcome.CUT_SHORT: "incomplete",
}
"""Outcomes a response ends with: a limit cut the answer short, which Responses says as
"incomplete" (``max_output_tokens``). The others have no answer: ``response.failed``, or an
HTTP error when not streamed (``faces.openai.errors.run_error``)."""


# -- the response object ---------------------------------------------------------------------


def usage_json(usage: Usage) -> dict[str, Any]:
    """Responses' usage; the providers report no cache writes or reasoning tokens."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message(item_id: str, text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [_text_part(text)]
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _error_json(error: HttpError) -> dict[str, Any]:
    """An error as Responses streams it: ``code`` is a string there, so the HTTP status
    the same failure gets when not streamed is sent as one."""
    return {
        "type": error.type,
        "code": str(error.status),
        "message": error.message,
        "param": error.param,
    }


class _Response:
    """What every ``response`` object of one request shares."""

    def __init__(self, request: ResponsesRequest, response_id: str, model: str) -> None:
        self.request = request
        self.id = response_id
        self.model = model
        self.created_at = int(time.time())
        self.item_id = "msg_" + response_id.removeprefix("resp_")

    def body(
        self,
        status: ResponseStatus,
        output: list[dict[str, Any]],
        usage: Usage | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        # A limit cut the answer short: the protocol's one reason for that (its clients map
        # it to "length", as the OpenAI face reports a limit); done.stop_reason says which.
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        request = self.request
        text_format = request.text.format if request.text is not None else None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": request.instructions,
            "metadata": request.metadata or {},
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "text": {"format": text_format or {"type": "text"}},
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_output_tokens": request.max_output_tokens,
            "previous_response_id": request.previous_response_id,
            "store": request.stored,
            "usage": None if usage is None else usage_json(usage),
        }

    def answered(
        self, ending: Ending, text: str, files: list[FileMade] | None = None
    ) -> dict[str, Any]:
        """The final object of a run that ended with an answer (cut short by a limit or not);
        an :class:`HttpError` for a run without one. The files the run made ride in
        ``"agentloop": {"files": [...]}`` (the protocol has no place for them)."""
        status = STATUSES.get(ending.outcome)
        if status is None:
            raise run_error(ending)
        output = [_message(self.item_id, text, status)]
        body = self.body(status, output, ending.done.usage)
        if files:
            body["agentloop"] = {"files": [made.file.model_dump(mode="json") for made in files]}
        return body


# -- streamed ----------------------------------------------------------------------------------


class ResponseStream(OpenAIStream):
    """Turns agent events into Responses' streaming events.

    The message item is opened at once, so a failure is always reported after output has
    begun (the AI SDK then reports it in the stream instead of retrying the request).
    A run without an answer ends the stream with ``error`` and ``response.failed``.
    ``cancel`` stops a run whose answer can no longer reach the client correctly.
    """

    def __init__(
        self,
        request: ResponsesRequest,
        response_id: str,
        model: str,
        cancel: CancelToken | None = None,
    ) -> None:
        super().__init__(cancel, request.agentloop.show_tools)
        self.request = request
        self.response = _Response(request, response_id, model)
        self._streamed: list[str] = []
        """The text sent so far (what a failure's incomplete message holds)."""
        self._usage: Usage | None = None
        self._sequence = 0
        self.final: dict[str, Any] | None = None
        """The final response object, once the run ended with an answer (what is stored)."""
        self._files: list[FileMade] = []

    def _event(self, type_: str, **fields: Any) -> bytes:
        body = {"type": type_, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return f"event: {type_}\ndata: {json.dumps(body)}\n\n".encode()

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.response.item_id, "output_index": 0, "content_index": 0}

    def on_text(self, text: str) -> list[bytes]:
        self._streamed.append(text)
        return [self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[])]

    def on_usage(self, event: UsageReport) -> list[bytes]:
        self._usage = event.total  # the request's usage so far, for a failure
        return []

    def on_file(self, event: FileMade) -> list[bytes]:
        self._files.append(event)
        return []

    def on_open(self) -> list[bytes]:
        response = self.response
        in_progress = response.body("in_progress", [])
        return [
            self._event("response.created", response=in_progress),
            self._event("response.in_progress", response=in_progress),
            self._event(
                "response.output_item.added",
                output_index=0,
                item=_message(response.item_id, None, "in_progress"),
            ),
            self._event(
                "response.content_part.added",
                **self._where(),
                part=_text_part(""),
            ),
        ]

    def fail(self, error: HttpError) -> list[bytes]:
        self.ended = True
        detail = _error_json(error)
        output = [_message(self.response.item_id, "".join(self._streamed), "incomplete")]
        failed = self.response.body("failed", output, self._usage, error=detail)
        return [
            self._event(
                "error",
                code=detail["code"],
                message=detail["message"],
                param=detail["param"],
                error=detail,
            ),
            self._event("response.failed", response=failed),
        ]

    def on_finish(self, ending: Ending) -> list[bytes]:
        self._usage = ending.done.usage
        if not ending.outcome.has_answer:
            return self.fail(run_error(ending))
        self.ended = True
        text = "".join(self._streamed)
        final = self.final = self.response.answered(ending, text, self._files)
        item = final["output"][0]
        ending_type = (
            "response.completed" if final["status"] == "completed" else "response.incomplete"
        )
        return [
            self._event("response.output_text.done", **self._where(), text=text, logprobs=[]),
            self._event("response.content_part.done", **self._where(), part=_text_part(text)),
            self._event("response.output_item.done", output_index=0, item=item),
            self._event(ending_type, response=final),
        ]


# -- not streamed ------------------------------------------------------------------------------


async def collect_response(
    request: ResponsesRequest, events: AsyncIterator[Event], response_id: str, model: str
) -> dict[str, Any]:
    """Run to the end and answer with one ``response`` object.

    Its text is ``done.text``, which already leaves out text a ``text_reset`` voided. A run
    without an answer (``error``, ``cancelled``) raises :class:`HttpError`, as
    ``faces.openai.collect_completion`` does.
    """
    files: list[FileMade] = []
    ending, tool_lines = await collect_run(_noting(events, files), request.agentloop.show_tools)
    text = "".join(tool_lines) + ending.done.text
    return _Response(request, response_id, model).answered(ending, text, files)


async def _noting(events: AsyncIterator[Event], files: list[FileMade]) -> AsyncIterator[Event]:
    """``events``, each ``file`` event noted in ``files`` on its way."""
    async for event in events:
        if isinstance(event, FileMade):
            files.append(event)
        yield event
