"""Files through the protocol faces, each with its own real client: the AI SDK's UI message
stream (the ``ai`` package under Node), the Responses API (the openai SDK), MCP (the ``mcp``
client SDK) and AG-UI (``@ag-ui/client``). A run that makes a file (``make_file``, kept as
execute_code keeps one) shows it as each protocol can; a person's file in each protocol's
own form becomes the run's attachment, put in its working directory."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import mcp_types as types
import openai
import pytest

from agentloop.files.limits import MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS
from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.integration.thread_faces import ThreadedApp
from tests.mcp_session import open_mcp_session
from tests.sample_tools import list_files_tool, make_file_tool, tiny_png
from tests.served import TOKEN, ServedApp, make_service

JSON = dict[str, Any]
CSV = b"city,people\nParis,2102650\nLyon,522250\n"


@pytest.fixture
def served(tmp_path: Path, llm: ScriptedLLM) -> Iterator[ThreadedApp]:
    with ThreadedApp(tmp_path, "files-faces", [make_file_tool(), list_files_tool()]) as app:
        yield app


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def listed(result: JSON) -> JSON:
    """What ``list_files`` returned, from its tool message."""
    return dict(json.loads(result["content"])["result"])


def tool_messages(llm: ScriptedLLM, request: int = -1) -> list[JSON]:
    return [m for m in llm.requests[request].messages if m["role"] == "tool"]


def last_user_text(llm: ScriptedLLM, request: int = 0) -> str:
    return str([m for m in llm.requests[request].messages if m["role"] == "user"][-1]["content"])


# -- the AI SDK's UI message stream ---------------------------------------------------------


def ui_chat(app: ThreadedApp, *turns: JSON) -> list[JSON]:
    out = run_node("ui_files_client.mjs", {"url": app.url, "token": TOKEN, "turns": list(turns)})
    return list(out["turns"])


def ui_post(app: ThreadedApp, messages: list[JSON]) -> httpx.Response:
    return httpx.post(
        f"{app.url}/api/chat",
        json={"messages": messages, "agentloop": {"tools": ["make_file", "list_files"]}},
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )


def test_ui_stream_client_gets_a_file_part_whose_url_fetches_the_png(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(
        Reply(tool_calls=[call("make_file")]),
        Reply(text="Here is the chart."),
        Reply(text="You are welcome."),
    )
    first, second = ui_chat(
        served, {"text": "Chart it."}, {"text": "Thanks."}
    )  # the second sends the first answer's file part back

    assert first["thrown"] is None
    assert first["errors"] == []
    parts = first["message"]["parts"]
    kinds = [p["type"] for p in parts]
    assert kinds.index("tool-make_file") < kinds.index("file") < kinds.index("text")
    [file_part] = [p for p in parts if p["type"] == "file"]
    assert file_part["mediaType"] == "image/png"
    meta = file_part["providerMetadata"]["agentloop"]
    assert meta["filename"] == "chart.png"
    assert meta["size"] == len(tiny_png())
    assert meta["callId"] == parts[kinds.index("tool-make_file")]["toolCallId"]
    link = f"/files/{meta['id']}?expires={meta['expiresAt']}&signature="
    assert file_part["url"].startswith(link)
    [fetched] = first["fetched"]
    assert fetched["status"] == 200
    assert base64.b64decode(fetched["base64"]) == tiny_png()
    assert fetched["contentType"] == "image/png"

    assert second["thrown"] is None  # the assistant's file part was taken back as display
    assert second["errors"] == []
    assert [p["text"] for p in second["message"]["parts"] if p["type"] == "text"] == [
        "You are welcome."
    ]
    history = llm.requests[-1].messages
    assert not any("/files/" in str(m.get("content")) for m in history)


def test_ui_stream_user_file_parts_become_attachments(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(
        Reply(tool_calls=[call("list_files")]),
        Reply(text="Read it."),
        Reply(tool_calls=[call("list_files")]),
        Reply(text="Still there."),
    )
    csv = {"mediaType": "text/csv", "filename": "data.csv", "url": data_url(CSV, "text/csv")}
    nameless = {"mediaType": "text/plain", "url": data_url(b"note", "text/plain")}
    first, second = ui_chat(
        served, {"text": "Sum the column.", "files": [csv, nameless]}, {"text": "Again."}
    )

    assert first["thrown"] is None
    assert first["errors"] == []
    files = listed(tool_messages(llm, 1)[0])
    assert files == {"data.csv": CSV.decode(), "attachment.txt": "note"}
    asked = last_user_text(llm, 0)
    assert asked.startswith("Sum the column.")
    assert f"data.csv (text/csv, {len(CSV)} B)" in asked
    # Without a thread the whole chat is sent again: its files are put back for the next run.
    assert second["thrown"] is None
    assert listed(tool_messages(llm, 3)[-1]) == files


@pytest.mark.parametrize(
    ("part", "status", "param", "says"),
    [
        (
            {"type": "file", "mediaType": "text/csv", "url": "https://example.com/d.csv"},
            422,
            "messages.0.parts.1.url",
            "fetches no links",
        ),
        (
            {"type": "file", "mediaType": "text/csv", "url": "data:text/csv,a,b"},
            422,
            "messages.0.parts.1.url",
            "base64",
        ),
        (
            {"type": "file", "mediaType": "text/csv", "url": "data:text/csv;base64,@@@"},
            422,
            "messages.0.parts.1.url",
            "not valid base64",
        ),
        (
            {
                "type": "file",
                "mediaType": "application/octet-stream",
                "url": data_url(bytes(MAX_ATTACHMENT_BYTES + 3), "application/octet-stream"),
            },
            413,
            "messages.0.parts.1.url",
            "the limit is",
        ),
    ],
    ids=["https link", "not base64 data URL", "bad base64", "too large"],
)
def test_ui_stream_bad_file_parts_are_refused(
    served: ThreadedApp, part: JSON, status: int, param: str, says: str
) -> None:
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}, part]}
    answer = ui_post(served, [message])
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["param"] == param
    assert says in answer.json()["error"]["message"]
    assert served.finished == []


def test_ui_stream_only_a_files_bytes_are_left_out_of_the_message_bound(
    served: ThreadedApp,
) -> None:
    """A 600 KB file part passes the 100,000-character message bound (it is bounded as an
    attachment); text that merely starts with "data:" is still counted."""
    part = {"type": "file", "mediaType": "text/plain", "url": data_url(b"x" * 450_000, "a/b")}
    text = {"type": "text", "text": "data:" + "y" * 120_000}
    too_long = ui_post(served, [{"id": "u1", "role": "user", "parts": [part, text]}])
    assert too_long.status_code == 413, too_long.text
    assert too_long.json()["error"]["type"] == "message_too_large"
    counted = int(too_long.json()["error"]["message"].split(" has ")[1].split()[0])
    assert 120_000 < counted < 121_000  # the text and the parts' shape, not the 600 KB


def test_ui_stream_too_many_files_is_413(served: ThreadedApp) -> None:
    part = {"type": "file", "mediaType": "text/plain", "url": data_url(b"x", "text/plain")}
    message = {"id": "u1", "role": "user", "parts": [part] * (MAX_ATTACHMENTS + 1)}
    answer = ui_post(served, [message])
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["param"] == f"messages.0.parts.{MAX_ATTACHMENTS}"


# -- the Responses API ----------------------------------------------------------------------


def responses_client(app: ThreadedApp) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{app.url}/v1", api_key=TOKEN, max_retries=0)


AGENT_TOOLS = {"agentloop": {"tools": ["make_file", "list_files"]}}


def test_responses_input_file_becomes_an_attachment(served: ThreadedApp, llm: ScriptedLLM) -> None:
    llm.script(Reply(tool_calls=[call("list_files")]), Reply(text="Two cities."))
    response = responses_client(served).responses.create(
        model="agentloop",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "How many cities?"},
                    {
                        "type": "input_file",
                        "filename": "d.csv",
                        "file_data": data_url(CSV, "text/csv"),
                        "detail": "auto",
                    },
                ],
            }
        ],
        extra_body=AGENT_TOOLS,
    )
    assert response.output_text == "Two cities."
    assert listed(tool_messages(llm)[0]) == {"d.csv": CSV.decode()}
    asked = last_user_text(llm)
    assert asked.startswith("How many cities?")
    assert f"d.csv (text/csv, {len(CSV)} B)" in asked
    # The stored input items name the file; its bytes are not kept with the response.
    items = responses_client(served).responses.input_items.list(response.id)
    [item] = items.data
    kept_file = item.model_dump()["content"][1]
    assert (kept_file["type"], kept_file["filename"], kept_file["file_data"]) == (
        "input_file",
        "d.csv",
        None,
    )


@pytest.mark.parametrize(
    ("part", "role", "param", "says"),
    [
        ({"type": "input_file", "file_id": "file-abc"}, "user", "file_id", "not kept"),
        (
            {"type": "input_file", "file_url": "https://example.com/d.csv"},
            "user",
            "file_url",
            "fetches no links",
        ),
        ({"type": "input_file", "filename": "d.csv"}, "user", "file_data", "bytes"),
        (
            {"type": "input_file", "filename": "d.csv", "file_data": "https://x/d.csv"},
            "user",
            "file_data",
            "data: URL",
        ),
        (
            {"type": "input_file", "filename": "d.csv", "file_data": data_url(b"x", "a/b")},
            "assistant",
            "type",
            "user's messages only",
        ),
    ],
    ids=["file_id", "file_url", "no bytes", "a link as data", "an assistant's file"],
)
def test_responses_file_references_are_refused_by_name(
    served: ThreadedApp, part: JSON, role: str, param: str, says: str
) -> None:
    items: list[Any] = [{"role": role, "content": [part]}]
    if role == "assistant":
        items.append({"role": "user", "content": "Go on."})
    with pytest.raises(openai.UnprocessableEntityError) as raised:
        responses_client(served).responses.create(model="agentloop", input=items)
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["param"] == f"input.0.content.0.{param}"
    assert says in error["message"]
    assert served.finished == []


@pytest.mark.parametrize("stream", [False, True], ids=["collected", "streamed"])
def test_responses_answer_carries_the_runs_files(
    served: ThreadedApp, llm: ScriptedLLM, stream: bool
) -> None:
    llm.script(Reply(tool_calls=[call("make_file")]), Reply(text="Charted."))
    client = responses_client(served)
    request: JSON = {"model": "agentloop", "input": "Chart it.", "extra_body": AGENT_TOOLS}
    if stream:
        events = list(client.responses.create(stream=True, **request))
        response = events[-1].response
        assert events[-1].type == "response.completed"
    else:
        response = client.responses.create(**request)
    assert response.output_text == "Charted."
    [ref] = (response.model_extra or {})["agentloop"]["files"]
    assert ref["name"] == "chart.png"
    assert ref["media_type"] == "image/png"
    fetched = httpx.get(served.url + ref["url"], timeout=10)
    assert fetched.status_code == 200
    assert fetched.content == tiny_png()
    # Kept with the stored response, as answered.
    kept = client.responses.retrieve(response.id)
    assert (kept.model_extra or {})["agentloop"]["files"][0]["id"] == ref["id"]


# -- MCP ------------------------------------------------------------------------------------


@pytest.fixture
def mcp_served(llm: ScriptedLLM, provider_env: ScriptedLLM) -> Iterator[ServedApp]:
    service = make_service([make_file_tool(), list_files_tool()])
    with ServedApp(service, name="mcp-files", lifespan="on") as app:
        yield app


async def test_mcp_ask_returns_an_image_inline_and_other_files_as_links(
    mcp_served: ServedApp, llm: ScriptedLLM
) -> None:
    table = "city,people\nParis,2102650\n"
    llm.script(
        Reply(tool_calls=[call("make_file"), call("make_file", name="table.csv", text=table)]),
        Reply(text="A chart and a table."),
    )
    async with open_mcp_session(mcp_served.url) as session:
        result = await session.call_tool(
            "ask", {"question": "Chart and tabulate.", "tools": ["make_file"]}
        )

    assert not result.is_error
    text, image, link = result.content
    assert isinstance(text, types.TextContent)
    assert text.text == "A chart and a table."
    assert isinstance(image, types.ImageContent)
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data) == tiny_png()
    assert isinstance(link, types.ResourceLink)
    assert (link.name, link.mime_type, link.size) == ("table.csv", "text/csv", len(table))
    assert link.uri.startswith(f"{mcp_served.url}/files/")  # absolute: the client has no page
    async with httpx.AsyncClient() as client:
        fetched = await client.get(link.uri)
    assert fetched.status_code == 200
    assert fetched.text == table
    files = result.structured_content["files"]
    assert [f["name"] for f in files] == ["chart.png", "table.csv"]
    assert urlsplit(files[1]["url"]).path == urlsplit(link.uri).path


async def test_mcp_ask_without_files_answers_as_before(
    mcp_served: ServedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Nothing made."))
    async with open_mcp_session(mcp_served.url) as session:
        result = await session.call_tool("ask", {"question": "Hi.", "tools": []})
    assert [type(block) for block in result.content] == [types.TextContent]
    assert "files" not in result.structured_content


# -- AG-UI ----------------------------------------------------------------------------------


def test_ag_ui_client_gets_a_custom_file_event_whose_url_fetches_the_png(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(tool_calls=[call("make_file")]), Reply(text="Charted."), Reply(text="Yes."))
    params = {"forwardedProps": {"agentloop": {"tools": ["make_file"]}}}
    case = {
        "name": "files",
        "turns": [{"user": "Chart it.", "params": params}, {"user": "Is it done?"}],
    }
    output = run_node("ag_ui_client.mjs", {"url": served.url, "token": TOKEN, "cases": [case]})

    assert output["printed"] == []  # the client's own verification found nothing to strip
    first, second = output["cases"]["files"]
    assert first["thrown"] is None
    assert first["runErrors"] == []
    kinds = [(e["type"], e.get("name")) for e in first["events"]]
    at = kinds.index(("CUSTOM", "agentloop.file"))
    assert kinds[at - 1] == ("TOOL_CALL_RESULT", None)
    ref = first["events"][at]["value"]
    assert ref["call_id"] == first["events"][at - 1]["toolCallId"]
    assert (ref["name"], ref["media_type"]) == ("chart.png", "image/png")
    fetched = httpx.get(served.url + ref["url"], timeout=10)
    assert fetched.status_code == 200
    assert fetched.content == tiny_png()
    assert second["thrown"] is None  # the history sent back after a file is taken
    assert second["finished"]["outcome"] == "success"


# -- OpenAI chat completions ----------------------------------------------------------------


def test_chat_completions_shows_no_files_and_refuses_file_parts(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    """The protocol has no place for either: the answer is the text alone (the file is still
    kept for the caller), and a file content part is a 422 naming the message's content."""
    llm.script(Reply(tool_calls=[call("make_file")]), Reply(text="Charted."))
    client = responses_client(served)
    completion = client.chat.completions.create(
        model="agentloop",
        messages=[{"role": "user", "content": "Chart it."}],
        extra_body=AGENT_TOOLS,
    )
    assert completion.choices[0].message.content == "Charted."
    assert "files" not in json.dumps(completion.model_dump())

    file_part = {
        "type": "file",
        "file": {"filename": "d.csv", "file_data": data_url(CSV, "text/csv")},
    }
    with pytest.raises(openai.UnprocessableEntityError) as raised:
        client.chat.completions.create(
            model="agentloop",
            messages=[{"role": "user", "content": [file_part]}],  # type: ignore[list-item]
        )
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["param"].startswith("messages.0")
