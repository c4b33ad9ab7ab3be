"""OpenAI's Responses API, its text-conversation part: ``POST /v1/responses``.

A thin translator over the run's one event stream, so that the openai SDK's
``client.responses.create`` and the AI SDK's default OpenAI provider talk to the agent
unchanged. ``instructions`` and ``input`` (a string, or message items with text parts;
an earlier response's ``output`` can be sent back as input) become the conversation, a
user's ``input_file`` parts (``file_data`` as a data URL) its attachments;
``temperature``, ``top_p``, ``max_output_tokens`` and ``text.format`` become the run's
sampling and response format; agent options travel in an ``agentloop`` object, as on the
OpenAI face. ``store`` (unset: true) keeps the response and its conversation for the caller,
and ``previous_response_id`` continues from one (``kept.py``, ``saved.py``); ``GET`` and
``DELETE /v1/responses/{id}`` and its ``input_items`` read and delete them (``route.py``).
Other fields are refused with a 422 naming them.

The answer is one assistant ``message`` item with one ``output_text`` part. Streamed,
top-level events become (sub-agents show only in the usage, which counts them)::

    (start)             response.created, response.in_progress,
                        response.output_item.added, response.content_part.added
    text_delta          response.output_text.delta (sent text is never taken back: a
                        text_reset is honoured as the OpenAI face does, see SentText)
    tool_call_*         nothing; a line of text with "agentloop": {"show_tools": true}
    done, completed     response.output_text.done, response.content_part.done,
                        response.output_item.done, response.completed
    done, a limit       the same, ending in response.incomplete (status "incomplete",
                        incomplete_details.reason "max_output_tokens", the protocol's
                        "cut short", as the OpenAI face says "length")
    error, or a done    error (its nested "error" object makes the openai SDK raise),
    without an answer   then response.failed

A run's files ride in the final response object as ``"agentloop": {"files": [FileRef...]}``
(the protocol's own file outputs are its hosted tools'). Every event carries
``sequence_number``. Not streamed, a run without an answer is an
HTTP error, as on the OpenAI face.
"""

from agentloop.faces.responses.request import ResponsesRequest
from agentloop.faces.responses.stream import ResponseStream

__all__ = ["ResponseStream", "ResponsesRequest"]
