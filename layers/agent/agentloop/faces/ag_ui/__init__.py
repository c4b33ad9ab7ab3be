"""The agent as an AG-UI agent: ``POST /ag-ui`` takes a ``RunAgentInput``, streams AG-UI events.

AG-UI 1.0 (``@ag-ui/core`` 1.0), as ``@ag-ui/client``'s ``HttpAgent`` parses and verifies it:
one ``data: <json>`` SSE message per event. The face translates handle_chat's events:

=====================  ==================================================================
agentloop event        AG-UI events
=====================  ==================================================================
(stream opens)         RUN_STARTED {threadId, runId, parentRunId} from the input
turn_start             STEP_FINISHED of the last turn, STEP_STARTED "turn <n>"
text_delta             TEXT_MESSAGE_START (first text of a message), TEXT_MESSAGE_CONTENT
text_reset             top level: :class:`SentText` (the retried text is held back while it
                       repeats what was sent; text that departs ends the run in RUN_ERROR
                       "stream_cut"); sub-agent: TEXT_MESSAGE_END with metadata
                       ``agentloop.voided`` and the retried text in a new message
tool_call_start        TEXT_MESSAGE_END of open text, TOOL_CALL_START/ARGS/END
                       (parentMessageId: the turn's assistant message)
tool_call_result       TOOL_CALL_RESULT (metadata ``agentloop``: ok, duration_ms)
approval_request       TOOL_CALL_START/ARGS/END of the call that waits (it is not run)
subagent_start         SUBAGENT_STARTED {subagentRunId: the sub-agent's run_id, name
                       "ask_llm", description: its query, parentToolCallId,
                       parentMessageId, parentSubagentRunId when nested}
subagent_finish        SUBAGENT_FINISHED {result, outcome success}, or SUBAGENT_ERROR when
                       it stopped with "error" or "cancelled"
notice, model_switched CUSTOM "agentloop.notice" / "agentloop.model_switched"
file (any depth)       CUSTOM "agentloop.file" {the FileRef} (AG-UI has no file event)
usage                  summed per model into RUN_FINISHED.usage / RUN_ERROR.usage
error (top level)      RUN_ERROR {message, code}; the rest of the run is drained unsent
done (top level)       RUN_FINISHED {result (stop reason, usage, ``sources``...), outcome,
                       usage}; "cancelled": outcome
                       cancelled; "error" without an error event: RUN_ERROR "internal";
                       a pause for approval: outcome interrupt, one interrupt per call
=====================  ==================================================================

Every event of a sub-agent carries ``subagentRunId``; whatever a message, step or sub-agent
left open is closed before the run's last event. The history sent back drops messages with a
``subagentRunId`` (a sub-agent's own work, which its ``ask_llm`` tool result sums up).
Agent options travel in ``forwardedProps.agentloop`` (model, tools, approval_tools,
max_iterations, token_budget); ``context`` entries become one system message.

Threads (opt-in): ``forwardedProps.agentloop.thread_id`` set to ``threadId`` runs on the
caller's thread of that id (made by its first run). The thread is authoritative: of the whole
list the client sends, the new messages are those after its last assistant or tool message.

Tool approval is AG-UI's interrupt / resume. A run paused on calls that need a person's
approval finishes with ``outcome: {type: "interrupt", interrupts}``, one per call: ``id`` and
``toolCallId`` = the call's id, ``reason`` "tool_call", a ``message``, a ``responseSchema``
({approved: boolean, reason?: string}) and ``metadata.agentloop`` {name, arguments, resume}:
``resume`` is the paused run's signed token. The next run answers every interrupt in
``RunAgentInput.resume``: ``resolved`` with ``payload`` {approved, reason?}, or ``cancelled``
(not run, as a denial), each entry echoing the interrupt's ``metadata`` (the protocol's place
for "a signature proving the decision was not tampered with"), and the thread's messages as
the client holds them. The resumed run emits no TOOL_CALL_START again: TOOL_CALL_RESULT
against each decided call, then the rest of the run.
"""

from agentloop.faces.ag_ui.request import APPROVAL_SCHEMA, RunAgentInput
from agentloop.faces.ag_ui.stream import AgUiStream

__all__ = ["APPROVAL_SCHEMA", "AgUiStream", "RunAgentInput"]
