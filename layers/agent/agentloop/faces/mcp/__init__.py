"""The agent as an MCP server: one tool, ``ask``, behind ``POST /mcp`` (Streamable HTTP).

``chat_app`` authenticates the request (401 like every route), then hands it to the SDK's
``StreamableHTTPSessionManager`` in stateless mode (no sessions to keep: each POST stands
alone, which suits Lambda) with SSE answers, so a call's progress can stream. The ``ask``
handler builds a ``ChatRequest`` and starts the run through the same seam as every face
(``start_run``: a plan's 422 refusal becomes a tool error naming the argument), then
translates the run's events:

=================================  ==========================================================
agentloop event                    MCP message
=================================  ==========================================================
tool_call_start / tool_call_result ``notifications/progress`` (when the call carries a
subagent_start / subagent_finish   progressToken): a human-readable ``message``, and the
notice / model_switched            event itself in ``_meta["agentloop/event"]``; ``depth`` and
                                   ``parent_call_id`` tell sub-agents' activity apart
text_delta, usage, turn_start ...  nothing (the answer comes whole, in the result)
done (depth 0)                     the ``tools/call`` result: text content = the answer,
                                   ``structuredContent`` = {answer, stop_reason, iterations,
                                   usage, usage_by_depth, sources (``done.sources``)}; a run
                                   without an answer (failed, cancelled, paused): a result
                                   with ``isError`` saying why (a failure: the error event)
file (any depth)                   after the answer's text: ``image`` content (a raster image
                                   up to 1 MiB, read as the caller's file) or a
                                   ``resource_link``; ``structuredContent.files``
=================================  ==========================================================

``tools/list`` answers with ``ask`` as :func:`ask_tool` describes it for this server: its
``tools`` argument lists the tool names a call may pass (``ToolChoice``). Those texts are read
by the model that calls ``ask``, so they are written for it, and pydantic's titles and class
docstrings are kept out of the schemas.

Bad arguments and refusals are tool errors (``isError``), which the calling model can read;
an unknown tool name is a JSON-RPC error. A client that leaves cancels the run (its token),
and the run is drained on its own task so it still ends with ``done``, logged and measured.
The SDK is imported with this module, which ``chat_app`` imports only when ``/mcp`` is used.
"""

from agentloop.faces.mcp.server import McpEndpoint, Seat
from agentloop.faces.mcp.tool import PLAN_PARAMS, ToolChoice

__all__ = ["PLAN_PARAMS", "McpEndpoint", "Seat", "ToolChoice"]
