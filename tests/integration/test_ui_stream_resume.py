"""The AI SDK's resumable streams through its own chat engine (``Chat`` from
``@ai-sdk/react``, what ``useChat({resume: true})`` wraps; ``tests/node/ui_resume_client.mjs``):
a page left in the middle of an answer, reloaded, gets the whole answer from
``GET /api/chat/{id}/stream`` while the run goes on; once the run has ended the route is a
204 and the chat stays empty and ready. Another principal's chat id is a 404."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.node_client import run_node
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.integration.thread_faces import OTHER, ThreadedApp
from tests.served import TOKEN

CHAT = "pQ7rT2xW9kLm4NbV"
ANSWER = " ".join(f"part{i}" for i in range(40))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ThreadedApp]:
    with ThreadedApp(tmp_path, "ui-stream-resume") as app:
        yield app


def test_a_reloaded_page_resumes_the_answer_in_flight(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text=ANSWER, chunk_delay=0.03))
    out = run_node(
        "ui_resume_client.mjs",
        {"url": served.url, "token": TOKEN, "chatId": CHAT, "text": "Count to forty."},
    )
    assert out["partial"]
    assert ANSWER.startswith(out["partial"])
    assert out["partial"] != ANSWER
    resumed = out["resumed"]
    assert (resumed["status"], resumed["error"]) == ("ready", None)
    assert resumed["texts"] == [{"role": "assistant", "text": ANSWER}]
    assert resumed["statuses"] == ["finished"]
    [done] = served.runs(1)
    assert done.stop_reason == "completed"  # the first page's leaving cancelled nothing
    assert out["after"]["texts"] == []
    assert (out["after"]["status"], out["after"]["error"]) == ("ready", None)
    gets = [r["status"] for r in out["requests"] if r["method"] == "GET"]
    assert gets == [200, 204]
    assert served.kept(CHAT) == [("user", "Count to forty."), ("assistant", ANSWER)]


def test_another_principals_chat_is_a_404_and_a_chat_with_nothing_running_a_204(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(Reply(text="Hi."))
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
    sent = served.call("POST", "/api/chat", json={"id": CHAT, "message": message})
    assert sent.status_code == 200
    assert served.call("GET", f"/api/chat/{CHAT}/stream").status_code == 204
    assert served.call("GET", f"/api/chat/{CHAT}/stream", OTHER).status_code == 404
    assert served.call("GET", "/api/chat/nothing-here/stream").status_code == 404
    assert served.call("GET", f"/api/chat/{CHAT}/stream", "wrong").status_code == 401
