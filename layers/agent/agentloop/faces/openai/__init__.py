"""The OpenAI faces: ``POST /v1/chat/completions`` (here) and ``POST /v1/responses``
(:mod:`agentloop.faces.responses`, which shares this package's errors and stream).

Existing OpenAI clients and chat UIs can talk to the agent unchanged: the request's
messages become a :class:`ChatRequest`, the run's top-level text becomes the
completion. Tool activity stays out of the text unless the request asks for it
with ``"agentloop": {"show_tools": true}``; agent options (tools, limits) travel in
that same ``agentloop`` object, since OpenAI's own fields have no place for them.

Client-side tools work as OpenAI's: the request's ``tools`` are offered to the model beside
the server's; when the model calls one, the run pauses and the answer ends with
``finish_reason: "tool_calls"`` and those calls only (the server's calls of that turn have
run and stay server-side), non-streamed on the message, streamed as ``delta.tool_calls``
chunks. The assistant message also carries ``"agentloop": {"resume": <token>}`` (streamed: on
the last chunk's delta), which the openai SDK sends back when the application appends the
message to its conversation: the next request, with the tools' results, continues the paused
run (its hidden server rounds, iterations and budget come from the token). Without the token
(LangChain drops unknown fields) the conversation goes on as a plain continuation.

Under failure the face speaks OpenAI's language too (docs/architecture.md, "The OpenAI
face under failure"): a run without an answer is an error object, never a ``"stop"``; a
run cut by a limit finishes with ``"length"``; errors tell SDKs not to retry what the
server has already retried; and sent text, which cannot be taken back, is only ever
continued, never contradicted.
"""

from agentloop.faces.openai.errors import refusal
from agentloop.faces.openai.request import CompletionRequest, OpenAIOptions, StreamOptions
from agentloop.faces.openai.stream import CompletionStream, collect_completion

__all__ = [
    "CompletionRequest",
    "CompletionStream",
    "OpenAIOptions",
    "StreamOptions",
    "collect_completion",
    "refusal",
]
