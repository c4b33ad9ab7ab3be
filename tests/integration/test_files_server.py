"""Files through ``POST /chat`` (the native face) and ``GET /files/{id}``, on loopback with
two principals and the scripted model: a run's ``file`` event and the link it carries (who
may fetch it, for how long, with which headers), and ``attachments`` into the run's working
directory (what lands there, under which name, and every refusal)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest

from agentloop.files.blobs import DirectoryBlobs
from agentloop.files.limits import MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.integration.thread_faces import OTHER, ThreadedApp
from tests.sample_tools import list_files_tool, make_file_tool, tiny_png
from tests.served import TOKEN

JSON = dict[str, Any]
USER = {"role": "user", "content": "Make me a chart."}


@pytest.fixture
def served(tmp_path: Path, llm: ScriptedLLM) -> Iterator[ThreadedApp]:
    with ThreadedApp(tmp_path, "files", [make_file_tool(), list_files_tool()]) as app:
        yield app


def chat(app: ThreadedApp, body: JSON, token: str = TOKEN) -> list[JSON]:
    """The run's events, as ``POST /chat`` streamed them."""
    return app.chat_events({"tools": ["make_file", "list_files"], **body}, token)


def refused(app: ThreadedApp, body: JSON | bytes) -> httpx.Response:
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{app.url}/chat", content=content, headers=headers, timeout=30)


def made_file(app: ThreadedApp, llm: ScriptedLLM, **arguments: str) -> JSON:
    """The ``file`` event of a /chat run whose model calls ``make_file(**arguments)``."""
    llm.script(Reply(tool_calls=[call("make_file", **arguments)]), Reply(text="Here it is."))
    events = chat(app, {"messages": [USER]})
    kinds = [event["type"] for event in events]
    at = kinds.index("file")
    assert kinds[at - 1] == "tool_call_result"
    assert events[at]["call_id"] == events[at - 1]["call_id"] == events[at]["file"]["call_id"]
    assert kinds[-1] == "done"
    return events[at]


def fetch(app: ThreadedApp, url: str, token: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.get(app.url + url, headers=headers, timeout=10)


def store_of(app: ThreadedApp) -> DirectoryBlobs:
    blobs = app.app.state.files.blobs  # type: ignore[attr-defined]
    assert isinstance(blobs, DirectoryBlobs)
    return blobs


# -- a run's file --------------------------------------------------------------------------


def test_a_chat_run_sends_a_file_event_whose_link_fetches_the_png(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    event = made_file(served, llm)
    ref = event["file"]
    assert ref["name"] == "chart.png"
    assert ref["media_type"] == "image/png"
    assert ref["size"] == len(tiny_png())
    assert ref["url"].startswith(f"/files/{ref['id']}?expires=")
    assert ref["expires_at"] > time.time()
    # The model was told of the file, never given its link.
    tool_message = next(m for m in llm.requests[-1].messages if m["role"] == "tool")
    assert "chart.png" in tool_message["content"]
    assert "/files/" not in tool_message["content"]

    linked = fetch(served, ref["url"])  # the link alone, no credentials
    assert linked.status_code == 200
    assert linked.content == tiny_png()
    assert linked.headers["content-type"] == "image/png"
    assert linked.headers["content-disposition"].startswith("inline;")
    assert linked.headers["x-content-type-options"] == "nosniff"

    owned = fetch(served, f"/files/{ref['id']}", TOKEN)  # no link: the owner's credentials
    assert owned.status_code == 200
    assert owned.content == tiny_png()
    assert fetch(served, f"/files/{ref['id']}", OTHER).status_code == 404
    assert fetch(served, f"/files/{ref['id']}").status_code == 401


def test_expired_and_tampered_links_are_403(served: ThreadedApp, llm: ScriptedLLM) -> None:
    ref = made_file(served, llm)["file"]
    file_id = ref["id"]
    signature = parse_qs(urlsplit(ref["url"]).query)["signature"][0]
    past = int(time.time()) - 5
    expired = fetch(
        served, f"/files/{file_id}?expires={past}&signature=" + store_of(served).sign(file_id, past)
    )
    assert expired.status_code == 403
    assert expired.json()["error"]["type"] == "expired"

    tampered = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    later = ref["expires_at"] + 3600  # a link made to last longer than it was signed for
    for query in (
        f"expires={ref['expires_at']}&signature={tampered}",
        f"expires={later}&signature={signature}",
        f"expires={ref['expires_at']}&signature=",
        f"expires=soon&signature={signature}",
        f"expires={ref['expires_at']}&signature={quote('é' * 64)}",  # compare_digest's TypeError
    ):
        answer = fetch(served, f"/files/{file_id}?{query}")
        assert answer.status_code == 403, query
        assert answer.json()["error"]["type"] == "forbidden"
    # Another file's signature does not open this one.
    other_id = "A" * 32
    assert (
        fetch(
            served, f"/files/{other_id}?expires={ref['expires_at']}&signature={signature}"
        ).status_code
        == 403
    )


@pytest.mark.parametrize(
    ("name", "text", "content_type"),
    [
        (
            "drawing.svg",
            '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
            "image/svg+xml",
        ),
        (
            "page.html",
            "<html><script>alert(document.cookie)</script></html>",
            "text/plain; charset=utf-8",
        ),
    ],
)
def test_svg_and_html_are_served_as_sandboxed_downloads(
    served: ThreadedApp, llm: ScriptedLLM, name: str, text: str, content_type: str
) -> None:
    ref = made_file(served, llm, name=name, text=text)["file"]
    answer = fetch(served, ref["url"])
    assert answer.status_code == 200
    assert answer.text == text
    assert answer.headers["content-type"] == content_type
    assert answer.headers["content-disposition"].startswith("attachment;")
    assert answer.headers["x-content-type-options"] == "nosniff"
    csp = answer.headers["content-security-policy"]
    assert "sandbox" in csp
    assert "default-src 'none'" in csp


# -- attachments ---------------------------------------------------------------------------

CSV = b"city,people\nParis,2102650\nLyon,522250\n"


def encoded(data: bytes, data_url: str | None = None) -> str:
    text = base64.b64encode(data).decode()
    return f"data:{data_url};base64,{text}" if data_url else text


def listed_by_the_tool(
    app: ThreadedApp, llm: ScriptedLLM, attachments: list[JSON]
) -> tuple[JSON, str]:
    """What ``list_files`` found in the run's working directory, and the user message the
    model was sent."""
    llm.script(Reply(tool_calls=[call("list_files")]), Reply(text="Read them."))
    events = chat(
        app, {"messages": [{"role": "user", "content": "Sum it."}], "attachments": attachments}
    )
    result = next(e for e in events if e["type"] == "tool_call_result")
    assert result["ok"], result
    user = [m for m in llm.requests[0].messages if m["role"] == "user"][-1]
    return json.loads(result["content"])["result"], str(user["content"])


def test_an_attached_csv_lands_in_the_working_directory_and_is_named_to_the_model(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    files, asked = listed_by_the_tool(
        served,
        llm,
        [
            {"name": "data.csv", "data": encoded(CSV)},
            {"name": "notes.txt", "data": encoded(b"hello", "text/plain")},  # a data: URL
        ],
    )
    assert files == {"data.csv": CSV.decode(), "notes.txt": "hello"}
    assert asked.startswith("Sum it.")
    assert f"data.csv (text/csv, {len(CSV)} B)" in asked
    assert "notes.txt (text/plain, 5 B)" in asked
    assert CSV.decode() not in asked  # named, never inlined


def test_a_refused_request_leaves_no_attachment_in_its_thread(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Hello."))
    thread_id = chat(served, {"messages": [USER], "thread_id": "new"})[0]["thread_id"]
    attachment = {"name": "refused.csv", "data": encoded(CSV)}
    for body in (
        {"tools": ["no_such_tool"]},  # the plan refuses it: 422
        {"max_cost_usd": 0.5, "model": "groq:model-without-a-price"},  # no price to keep it
    ):
        answer = refused(
            served,
            {"messages": [USER], "thread_id": thread_id, "attachments": [attachment], **body},
        )
        assert answer.status_code == 422, answer.text

    llm.script(Reply(tool_calls=[call("list_files")]), Reply(text="Nothing new."))
    events = chat(served, {"messages": [USER], "thread_id": thread_id})
    result = next(e for e in events if e["type"] == "tool_call_result")
    assert json.loads(result["content"])["result"] == {}


def test_a_path_in_an_attachments_name_is_dropped(served: ThreadedApp, llm: ScriptedLLM) -> None:
    files, asked = listed_by_the_tool(
        served,
        llm,
        [
            {"name": "../../etc/passwd", "data": encoded(b"root:x:0:0")},
            {"name": "..\\..\\boot.ini", "data": encoded(b"[boot]")},
            {"name": "passwd", "data": encoded(b"second")},
        ],
    )
    assert files == {"passwd": "root:x:0:0", "boot.ini": "[boot]", "passwd (2)": "second"}
    assert "../" not in asked
    assert "passwd (2)" in asked


def test_bad_attachments_get_precise_refusals(served: ThreadedApp) -> None:
    def body(*attachments: JSON) -> JSON:
        return {"messages": [USER], "attachments": list(attachments)}

    bad = refused(served, body({"name": "a.csv", "data": "not base64!"}))
    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["param"] == "attachments.0.data"
    assert "base64" in bad.json()["error"]["message"]

    bad_url = refused(served, body({"name": "a.csv", "data": "data:text/csv,plain"}))
    assert bad_url.status_code == 422
    assert "base64" in bad_url.json()["error"]["message"]

    nameless = refused(served, body({"name": "", "data": encoded(b"x")}))
    assert nameless.status_code == 422
    assert nameless.json()["error"]["param"] == "attachments.0.name"

    many = refused(
        served,
        body(*[{"name": f"{n}.txt", "data": encoded(b"x")} for n in range(MAX_ATTACHMENTS + 1)]),
    )
    # ChatRequest's own bounds: a 422 naming the field, before any byte is decoded.
    assert many.status_code == 422, many.text
    assert many.json()["error"]["param"] == "attachments"
    assert f"at most {MAX_ATTACHMENTS}" in many.json()["error"]["message"]

    big = MAX_ATTACHMENT_BYTES // 2 + 1024  # each fits, both do not
    full = refused(
        served, body(*[{"name": f"{n}.bin", "data": encoded(bytes(big))} for n in range(2)])
    )
    assert full.status_code == 413, full.text
    assert full.json()["error"]["param"] == "attachments"
    assert "limit" in full.json()["error"]["message"]

    too_large = refused(
        served, body({"name": "big.bin", "data": encoded(bytes(MAX_ATTACHMENT_BYTES + 1))})
    )
    assert too_large.status_code == 422, too_large.text
    assert too_large.json()["error"]["param"] == "attachments.0.data"
    assert f"the limit is {MAX_ATTACHMENT_BYTES:,}" in too_large.json()["error"]["message"]

    over_the_body = encoded(bytes(4 * MAX_ATTACHMENT_BYTES // 3))  # base64 past 6 MB
    body_413 = refused(served, body({"name": "huge.bin", "data": over_the_body}))
    assert body_413.status_code == 413, body_413.text

    after_the_answer = {
        "messages": [
            USER,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "list_files", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "{}"},
        ],
        "attachments": [{"name": "a.csv", "data": encoded(b"x")}],
    }
    late = refused(served, after_the_answer)
    assert late.status_code == 400
    assert late.json()["error"]["param"] == "attachments"
