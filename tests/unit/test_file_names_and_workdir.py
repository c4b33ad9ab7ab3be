"""Hostile names and a hostile shuttle answer, checked without a sandbox.

Names come from people (uploads) and programs (their files); the shuttle's answer comes from
inside the sandbox, where the program could have written it. Each must end up safe or
refused, never as a path outside its place or a workspace over its bounds.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from agentloop.files.limits import MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES
from agentloop.files.media import disposition, media_type, serving_headers
from agentloop.files.names import safe_name, safe_path, unique_name
from agentloop.sandbox.workdir import settle
from agentloop.server.routes import PAGE_HEADERS, page_headers
from agentloop.threads.info import title_from


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("../../etc/passwd", "passwd"),
        ("..\\..\\windows\\system.ini", "system.ini"),
        ("..", "file"),
        (".env", "_env"),
        ("", "file"),
        ("a\x00b\u202ec.csv", "abc.csv"),
        ("<img src=x onerror=alert(1)>.svg", "_img src_x onerror_alert(1)_.svg"),
        ("données 2026.csv", "données 2026.csv"),
        ("main.py", "_main.py"),
        ("x" * 300 + ".csv", "x" * 96 + ".csv"),
    ],
)
def test_a_name_is_one_safe_segment(raw: str, safe: str) -> None:
    assert safe_name(raw) == safe
    assert "/" not in safe_name(raw)


@pytest.mark.parametrize(
    ("path", "usable"),
    [
        ("output/chart.png", True),
        ("a/b/c.txt", True),
        ("a/b/c/d.txt", False),
        ("../x", False),
        ("/etc/passwd", False),
        ("output//x", False),
        ("output/.hidden", False),
        ("out put/x y.csv", True),
    ],
)
def test_a_program_s_path_is_used_only_as_it_is(path: str, usable: bool) -> None:
    assert (safe_path(path) == path) is usable


def test_names_are_made_unique() -> None:
    taken = {"data.csv"}
    assert unique_name("data.csv", taken) == "data (2).csv"
    assert unique_name("data.csv", taken) == "data (3).csv"
    assert unique_name("README", taken) == "README"


def test_types_come_from_the_name_and_nothing_can_run() -> None:
    assert media_type("chart.PNG") == "image/png"
    assert media_type("page.html") == "text/html"
    assert media_type("noext") == "application/octet-stream"
    assert disposition("chart.png", "image/png").startswith("inline")
    for name in ("drawing.svg", "page.html", "data.csv"):
        headers = serving_headers(name, media_type(name), 10)
        assert headers["content-disposition"].startswith("attachment")
        assert headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in headers["content-security-policy"]
    assert serving_headers("p.html", "text/html", 1)["content-type"].startswith("text/plain")
    quoted = disposition('a"b\r\n.png', "image/png")
    assert "\r" not in quoted
    assert '"a_b__.png"' in quoted


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_a_good_answer_gives_the_next_directory_and_the_files_made() -> None:
    before = {"data.csv": b"1,2\n", "old.txt": b"gone soon"}
    answer = {
        "present": ["data.csv", "output/chart.png", "notes.txt"],
        "changed": {"output/chart.png": b64(b"png"), "notes.txt": b64(b"n")},
        "skipped": ["link-to-etc"],
    }
    settled = settle(before, answer, stopped=False)

    assert settled.files == {"data.csv": b"1,2\n", "output/chart.png": b"png", "notes.txt": b"n"}
    assert [(m.name, m.data) for m in settled.made] == [("output/chart.png", b"png")]
    assert any("link-to-etc" in note for note in settled.notes)


@pytest.mark.parametrize(
    "answer",
    [
        {"present": "everything", "changed": {}},
        {"present": ["a"], "changed": {"a": "not base64!"}},
        {"present": ["a"], "changed": {"a": 5}},
        {"problem": "too_many_files", "count": 10_001},
        {"problem": "too_large", "path": "big", "bytes": 1 << 30},
        {"problem": "something else"},
        {
            "present": [f"f{i}" for i in range(MAX_WORKSPACE_FILES + 1)],
            "changed": {f"f{i}": "" for i in range(MAX_WORKSPACE_FILES + 1)},
        },
        {"present": ["a", "b"], "changed": {"a": b64(bytes(MAX_WORKSPACE_BYTES)), "b": b64(b"x")}},
    ],
)
def test_a_bad_or_forged_answer_changes_nothing(answer: dict[str, Any]) -> None:
    settled = settle({"keep.txt": b"k"}, answer, stopped=False)
    assert settled.files is None
    assert settled.made == []
    assert settled.notes


def test_names_that_cannot_be_kept_are_said_and_a_file_inside_a_file_is_dropped() -> None:
    answer = {
        "present": ["a", "a/b", "it's.png", "ok.txt"],
        "changed": {"a": b64(b"1"), "a/b": b64(b"2"), "it's.png": b64(b"3"), "ok.txt": b64(b"4")},
        "skipped": ["x" * 1_000_000],
    }
    settled = settle({}, answer, stopped=False)
    assert settled.files == {"a": b"1", "ok.txt": b"4"}
    assert any("a/b" in note and "it's.png" in note for note in settled.notes)
    assert max(len(note) for note in settled.notes) < 1_000


def test_files_that_cannot_stand_together_are_a_sandbox_error_not_a_crash() -> None:
    from agentloop.sandbox.models import SandboxLimits
    from agentloop.sandbox.runner import SandboxError, run_program

    with pytest.raises(SandboxError, match="could not prepare the working directory") as caught:
        run_program("print(1)", SandboxLimits(), files={"a": b"1", "a/b": b"2"})
    assert "/tmp" not in caught.value.message


def test_paths_outside_are_dropped_and_a_stopped_run_keeps_the_directory() -> None:
    answer = {
        "present": ["../escape", "/etc/passwd", "ok.txt"],
        "changed": {"../escape": b64(b"x"), "/etc/passwd": b64(b"x"), "ok.txt": b64(b"ok")},
    }
    assert settle({}, answer, stopped=False).files == {"ok.txt": b"ok"}
    stopped = settle({"a": b"a"}, None, stopped=True)
    assert stopped.files is None
    assert stopped.notes == []
    assert settle({"a": b"a"}, None, stopped=False).notes


def test_the_page_may_show_pictures_from_the_files_bucket_only_when_there_is_one() -> None:
    assert page_headers({}) is PAGE_HEADERS
    assert "img-src 'self' data:;" in PAGE_HEADERS["content-security-policy"]
    deployed = page_headers({"AGENTLOOP_FILES_BUCKET": "b"})["content-security-policy"]
    assert "img-src 'self' data: https://*.amazonaws.com;" in deployed
    custom = page_headers(
        {"AGENTLOOP_FILES_BUCKET": "b", "AGENTLOOP_FILES_ENDPOINT_URL": "http://127.0.0.1:9000/x"}
    )["content-security-policy"]
    assert "https://*.amazonaws.com http://127.0.0.1:9000;" in custom


def test_a_thread_s_title_leaves_the_attachment_note_out() -> None:
    from agentloop.files.workspace import Placed, attachment_note

    note = attachment_note([Placed("sales.csv", "text/csv", 2048)])
    assert note.endswith("sales.csv (text/csv, 2.0 KB)]")
    assert title_from([{"role": "user", "content": "Plot it" + note}]) == "Plot it"
