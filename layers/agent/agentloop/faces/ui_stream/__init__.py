"""The AI SDK's UI message stream (v1): ``POST /api/chat`` for ``useChat``'s default transport.

Request: what ``ai``'s ``DefaultChatTransport`` sends (``id``, ``messages`` as UI messages
with ``parts``, ``trigger``, ``messageId``) plus the transport's extra body fields: ``model``
and an ``agentloop`` object (``tools``, ``approval_tools``, ``max_iterations``,
``token_budget``), as on the OpenAI face. Earlier turns become the agent's history: text parts
are the content; finished tool parts (``tool-<name>``, ``dynamic-tool``) become an assistant
message with ``tool_calls`` and the tool results, one assistant message per step (an
``output-denied`` part's result is the denial the model read); reasoning, source, step-start
and data parts are display-only and skipped. A user's file parts (a ``data:`` URL each; a
link is refused, never fetched) are the run's attachments: every user message's when the
whole chat is sent, the new message's on a thread; an assistant's are files a run made,
display only.

Threads: a body with the chat ``id`` and only its new ``message`` (singular, as the AI SDK's
persistence guide's ``prepareSendMessagesRequest`` makes it) runs on the caller's thread ``id``
(made by its first such request); the server keeps the chat. A body with ``messages`` is
stateless, its ``id`` unread.

Tool approval (the SDK's own approval parts): a call that needs a person's approval is sent
as ``tool-input-available`` + ``tool-approval-request`` {approvalId = toolCallId}; the run
pauses, its ``finish`` saying ``tool-calls`` with ``messageMetadata.resume`` (the signed token,
which the transport sends back with the message). ``Chat.addToolApprovalResponse`` turns the
parts ``approval-responded``; the next request, ending with that assistant message, is the
paused run's continuation: its token from the message's metadata, a decision per responded
part. The answer continues the same message (``start`` carries its id): the decided calls get
``tool-output-available`` / ``tool-output-error`` or, denied, ``tool-output-denied``, and the
run goes on in new steps; its ``finish`` clears ``resume`` (or carries the next pause's).

Answer (top-level events; the stream opens with ``start`` {messageId}):

=================  ======================================================================
run_start          ``message-metadata`` {model, maxIterations, tokenBudget, budgetRemaining}
turn_start         ``finish-step`` (if a step is open), ``start-step``
text_delta         ``text-start`` (once per text part), ``text-delta``
text_reset         nothing: sent text cannot be taken back (:class:`SentText` holds back
                   the retried text while it repeats what was sent)
tool_call_start    ``tool-input-available`` {toolCallId, toolName, input} (not again for a
                   call decided in this request: its part is there already)
tool_call_result   ``tool-output-available`` {output: the result text} or, not ok,
                   ``tool-output-error`` {errorText: the result text}; a denied call's:
                   ``tool-output-denied``
approval_request   ``tool-input-available``, ``tool-approval-request`` {approvalId, toolCallId}
usage (any depth)  ``message-metadata`` {usage (the request's so far), budgetRemaining}
model_switched     ``message-metadata`` {model} and a ``data-notice`` part
notice             ``data-notice`` part {code, message}
file (any depth)   ``file`` {url, mediaType, providerMetadata.agentloop: {id, filename,
                   size, expiresAt, callId}}
error              kept for the end: ``error`` {errorText} before ``finish``
done               ``text-end``, ``source-url`` {sourceId, url, [title]} per ``done.sources``
                   (a continued answer: those its message lacks), ``finish-step``,
                   [``error``], ``finish`` {finishReason,
                   messageMetadata: usage, stopReason, iterations, budgetRemaining,
                   [resume]}, [DONE]; a pause finishes with ``tool-calls``
=================  ======================================================================

Sub-agents (events below the top level) are shown in a ``data-subagent`` part whose ``id``
is the ``ask_llm`` call id; the client replaces a data part with the same id in place, so
each update carries the whole state: every sub-agent of that call (``queries`` starts
several) with its query, current text, tool activity, notices, error and outcome.
"""

from agentloop.faces.ui_stream.chunks import usage_json
from agentloop.faces.ui_stream.request import UIChatRequest
from agentloop.faces.ui_stream.stream import STREAM_CUT_MESSAGE, UIMessageStream

__all__ = [
    "STREAM_CUT_MESSAGE",
    "UIChatRequest",
    "UIMessageStream",
    "usage_json",
]
