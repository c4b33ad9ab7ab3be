"""One run's events as AG-UI SSE messages (the package docstring has the table)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from agentloop.events import (
    ApprovalRequest,
    Done,
    ErrorEvent,
    Event,
    FileMade,
    ModelSwitched,
    Notice,
    RunStart,
    SubagentFinish,
    SubagentStart,
    TextDelta,
    TextReset,
    ToolCallResult,
    ToolCallStart,
    TurnStart,
    UsageReport,
)
from agentloop.faces.ag_ui.request import APPROVAL_REASON, APPROVAL_SCHEMA, RunAgentInput
from agentloop.faces.ag_ui.runs import JSON, RunFrames, frame, usage_json, usage_list
from agentloop.faces.outcome import NO_ANSWER, OUTCOMES, Ending, Outcome
from agentloop.faces.stream import FaceStream
from agentloop.limits import CancelToken
from agentloop.models import Approval, PendingCall, Usage
from agentloop.tools.results import truncate_middle

PROTOCOL_VERSION = "1.0"
SUBAGENT_NAME = "ask_llm"
RUN_OUTCOMES: dict[Outcome, str] = {
    Outcome.ANSWERED: "success",
    Outcome.CUT_SHORT: "success",
    Outcome.AWAITS_APPROVAL: "interrupt",
    Outcome.CANCELLED: "cancelled",
}
"""RUN_FINISHED's ``outcome.type`` per outcome (a limit's: success, the result's
``stop_reason`` says which, and the limit's notice ends the text); the others end in
RUN_ERROR."""


FILE_EVENT = "agentloop.file"
"""The CUSTOM event's name for a file a run made (its value: the ``FileRef``)."""


class AgUiStream(FaceStream[JSON]):
    """Turns one run's events into AG-UI SSE messages (see the package docstring).

    ``cancel`` stops a run whose answer can no longer reach the client correctly (a cut
    stream whose retry departs from what was sent); ``approvals`` are the decisions the
    input carries (``ChatRequest.approvals``).
    """

    def __init__(
        self,
        run_input: RunAgentInput,
        cancel: CancelToken | None = None,
        approvals: Sequence[Approval] | None = None,
    ) -> None:
        super().__init__(cancel, approvals)
        self.input = run_input
        self._ids = itertools.count(1)
        self._top = RunFrames(run_id="", subagent=None, ids=self._ids)
        self._subagents: dict[str, RunFrames] = {}
        self._calls: dict[tuple[int, str], tuple[str, str]] = {}
        """(depth, call id) -> (run id, parent message id), to place a sub-agent."""
        self._usage: dict[str, Usage] = {}
        self._model: str | None = None

    encode = staticmethod(frame)  # no method call of its own per frame

    def on_open(self) -> list[JSON]:
        body: JSON = {
            "type": "RUN_STARTED",
            "threadId": self.input.threadId,
            "runId": self.input.runId,
            "protocolVersion": PROTOCOL_VERSION,
        }
        if self.input.parentRunId is not None:
            body["parentRunId"] = self.input.parentRunId
        return [body]

    def on_close(self) -> list[JSON]:
        return [] if self.ended else self._fail("internal", "the run ended without finishing")

    # -- the top level --------------------------------------------------------------------------

    def on_usage(self, event: UsageReport) -> list[JSON]:
        self._usage[event.model] = self._usage.get(event.model, Usage()) + event.usage
        return []

    def on_text(self, text: str) -> list[JSON]:
        return self._top.text(text)  # its run id came with the run's first event

    def on_turn(self, event: TurnStart) -> list[JSON]:
        return self._run(event).turn(event.iteration)

    def on_tool_start(self, event: ToolCallStart) -> list[JSON]:
        if event.call_id in self.decided:  # its triad is in the interrupted run
            return self._run(event).close_text()
        return self._tool_call(event)

    def on_approval(self, event: ApprovalRequest) -> list[JSON]:
        return self._tool_call(event)

    def on_tool_result(self, event: ToolCallResult) -> list[JSON]:
        return self._run(event).tool_result(event)

    def on_error(self, event: ErrorEvent) -> list[JSON]:
        return self._fail(event.code, event.message)

    def on_cut(self, message: str) -> list[JSON]:
        return self._fail("stream_cut", message)

    def on_file(self, event: FileMade) -> list[JSON]:
        """AG-UI has no file event: its extension point, CUSTOM "agentloop.file", with the
        file's reference (a sub-agent's tagged with its run, as every event of it)."""
        value = event.file.model_dump(mode="json")
        return [self._run(event).tag({"type": "CUSTOM", "name": FILE_EVENT, "value": value})]

    def on_other(self, event: Event) -> list[JSON]:
        run = self._run(event)
        if isinstance(event, RunStart):
            self._model = event.model
        elif isinstance(event, Notice | ModelSwitched):
            return run.custom(event)
        return []

    def _run(self, event: Event) -> RunFrames:
        if event.depth == 0:
            self._top.run_id = event.run_id
            return self._top
        run = self._subagents.get(event.run_id)
        if run is None:  # a sub-agent this face did not see start: still attributed
            run = self._subagents[event.run_id] = self._new_run(event.run_id)
        return run

    def _new_run(self, run_id: str) -> RunFrames:
        return RunFrames(run_id=run_id, subagent=run_id, ids=self._ids)

    def _tool_call(self, event: ToolCallStart | ApprovalRequest) -> list[JSON]:
        run = self._run(event)
        frames = run.tool_call(event)
        assert run.message is not None  # tool_call opened the turn's message
        self._calls[(event.depth, event.call_id)] = (event.run_id, run.message)
        return frames

    # -- sub-agents -----------------------------------------------------------------------------

    def on_subagent(self, event: Event) -> list[JSON]:
        """A sub-agent's event: the same frames as the top level's, tagged with its run."""
        if isinstance(event, SubagentStart):
            return self._subagent_started(event)
        if isinstance(event, SubagentFinish):
            return self._subagent_finished(event)
        run = self._run(event)
        if isinstance(event, TurnStart):
            return run.turn(event.iteration)
        if isinstance(event, TextDelta):
            return run.text(event.text)
        if isinstance(event, TextReset):
            return run.reset(event.reason)
        if isinstance(event, ToolCallStart | ApprovalRequest):
            return self._tool_call(event)
        if isinstance(event, ToolCallResult):
            return run.tool_result(event)
        if isinstance(event, Notice | ModelSwitched):
            return run.custom(event)
        if isinstance(event, ErrorEvent):
            run.error = event
        return []

    def _subagent_started(self, event: SubagentStart) -> list[JSON]:
        self._subagents[event.run_id] = self._new_run(event.run_id)
        body: JSON = {
            "type": "SUBAGENT_STARTED",
            "subagentRunId": event.run_id,
            "name": SUBAGENT_NAME,
            "description": event.query,
            "parentToolCallId": event.call_id,
        }
        parent = self._calls.get((event.depth - 1, event.call_id))
        if parent is not None:
            parent_run, parent_message = parent
            body["parentMessageId"] = parent_message
            if event.depth > 1 and parent_run in self._subagents:
                body["parentSubagentRunId"] = parent_run
        return [body]

    def _subagent_finished(self, event: SubagentFinish) -> list[JSON]:
        run = self._subagents.pop(event.run_id, None)
        frames = run.close() if run is not None else []
        if OUTCOMES[event.stop_reason].has_answer:
            result = {
                "stop_reason": event.stop_reason,
                "iterations": event.iterations,
                "usage": usage_json(event.usage),
                "budget_remaining": event.budget_remaining,
            }
            finished = {"type": "SUBAGENT_FINISHED", "subagentRunId": event.run_id}
            return [*frames, {**finished, "result": result, "outcome": {"type": "success"}}]
        error = run.error if run is not None else None
        message = error.message if error else f"the sub-agent stopped: {event.stop_reason}"
        code = error.code if error else event.stop_reason
        failed = {"type": "SUBAGENT_ERROR", "subagentRunId": event.run_id}
        return [*frames, {**failed, "message": message, "code": code}]

    # -- the end --------------------------------------------------------------------------------

    def _close_all(self) -> list[JSON]:
        """Everything still open, sub-agents first: the run's last event comes next."""
        frames: list[JSON] = []
        for run_id, run in list(self._subagents.items()):
            frames += run.close()
            frames.append(
                {
                    "type": "SUBAGENT_ERROR",
                    "subagentRunId": run_id,
                    "message": "the run ended before the sub-agent finished",
                    "code": "cancelled",
                }
            )
        self._subagents.clear()
        return frames + self._top.close()

    def on_finish(self, ending: Ending) -> list[JSON]:
        kind = RUN_OUTCOMES.get(ending.outcome)
        done = ending.done
        asked = [p for p in done.pending if p.kind == "approval"]
        if kind is None or (kind == "interrupt" and not (asked and done.resume)):
            if ending.outcome is Outcome.FAILED:  # no error event said why
                return self._fail("internal", NO_ANSWER)
            return self._fail("internal", "the run paused for nothing this face can ask for")
        body: JSON = {
            "type": "RUN_FINISHED",
            "threadId": self.input.threadId,
            "runId": self.input.runId,
            "usage": usage_list(self._usage),
            "outcome": {"type": kind},
        }
        if kind == "interrupt":
            body["outcome"]["interrupts"] = [_interrupt(p, done.resume) for p in asked]
        if kind != "cancelled":
            body["result"] = self._result(done)
        frames = self._close_all()
        self.ended = True
        return [*frames, body]

    def _result(self, done: Done) -> JSON:
        """``RUN_FINISHED.result``, which ``runAgent`` returns to the application."""
        return {
            "model": self._model,
            "stop_reason": done.stop_reason,
            "iterations": done.iterations,
            "usage": usage_json(done.usage),
            "usage_by_depth": [usage_json(u) for u in done.usage_by_depth],
            "budget_remaining": done.budget_remaining,
            "sources": [source.model_dump() for source in done.sources],
        }

    def _fail(self, code: str, message: str) -> list[JSON]:
        frames = self._close_all()
        self.ended = True
        usage = usage_list(self._usage)
        return [*frames, {"type": "RUN_ERROR", "message": message, "code": code, "usage": usage}]


def _interrupt(call: PendingCall, token: str | None) -> JSON:
    """A call that waits for a person, as the interrupt the next run's resume entry answers."""
    return {
        "id": call.call_id,
        "reason": APPROVAL_REASON,
        "message": f"Run {call.name} with {truncate_middle(call.arguments, 500)}?",
        "toolCallId": call.call_id,
        "responseSchema": APPROVAL_SCHEMA,
        "metadata": {
            "agentloop": {"name": call.name, "arguments": call.arguments, "resume": token}
        },
    }
