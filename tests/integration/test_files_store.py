"""The file store on both backends: a directory (local) and S3 (moto's server on loopback).

The same contract holds on each: a kept file is its owner's alone (another caller's id and a
made-up id are the same ``None``), its link fetches the bytes with headers that cannot run
script, a thread's files and working directory go with the thread, and a backend that cannot
be reached is ``FilesUnavailable``. Deployed, ``GET /files/{id}`` with the owner's credentials
redirects to a fresh presigned link.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import boto3
import httpx
import pytest

from agentloop.config import ConfigurationError
from agentloop.files.artifacts import Artifacts, Made
from agentloop.files.blobs import DirectoryBlobs, FilesUnavailable, S3Blobs
from agentloop.files.settings import artifacts_from_env
from tests.integration.thread_faces import OTHER, ThreadedApp
from tests.sample_tools import tiny_png
from tests.served import PRINCIPAL
from tests.store_backends import Moto, aws_env, moto_server

__all__ = ["moto_server"]

T = TypeVar("T")
OWNER, INTRUDER = "key:alice", "key:mallory"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


@pytest.fixture(params=["directory", "s3"])
def files(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Artifacts, str]]:
    """The store, and the base its relative links resolve against ("" for absolute ones)."""
    if request.param == "directory":
        yield Artifacts(DirectoryBlobs(tmp_path / "files")), "http://unused"
        return
    aws_env(monkeypatch)
    moto: Moto = request.getfixturevalue("moto_server")
    bucket = f"files-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto.endpoint).create_bucket(Bucket=bucket)
    yield Artifacts(S3Blobs(bucket, endpoint_url=moto.endpoint)), ""


def test_a_kept_file_is_its_owner_s_alone(files: tuple[Artifacts, str]) -> None:
    artifacts, _ = files
    png = tiny_png()
    [ref] = run(artifacts.keep(OWNER, [Made("output/../chart.png", png)], call_id="call_1"))

    assert (ref.name, ref.media_type, ref.size, ref.call_id) == (
        "chart.png",
        "image/png",
        len(png),
        "call_1",
    )
    assert len(ref.id) == 32
    blob = run(artifacts.open(OWNER, ref.id))
    assert blob is not None
    assert blob.data == png
    assert run(artifacts.open(INTRUDER, ref.id)) is None
    assert run(artifacts.ref(INTRUDER, ref.id)) is None
    for made_up in ("x" * 32, "../" * 11, "", ref.id[:-1]):
        assert run(artifacts.open(OWNER, made_up)) is None


def test_the_link_serves_the_bytes_and_cannot_run_script(files: tuple[Artifacts, str]) -> None:
    artifacts, base = files
    if base:
        pytest.skip(
            "a directory's link is served by the app (tests/integration/test_files_server.py)"
        )
    page = b"<html><script>alert(1)</script></html>"
    [png_ref, html_ref] = run(
        artifacts.keep(OWNER, [Made("chart.png", tiny_png()), Made("page.html", page)])
    )
    png = httpx.get(png_ref.url, timeout=10)
    assert png.status_code == 200
    assert png.content == tiny_png()
    assert png.headers["content-type"] == "image/png"
    html = httpx.get(html_ref.url, timeout=10)
    assert html.content == page
    assert html.headers["content-type"].startswith("text/plain")
    assert html.headers["content-disposition"].startswith("attachment")


def test_a_thread_s_files_and_directory_go_with_it(files: tuple[Artifacts, str]) -> None:
    artifacts, _ = files
    kept = run(
        artifacts.keep(OWNER, [Made("a.png", tiny_png()), Made("b.csv", b"x,y\n")], thread_id="t1")
    )
    run(artifacts.save_workspace(OWNER, "t1", {"data.csv": b"1,2\n", "output/a.png": b"p"}))

    listed = run(artifacts.thread_files(OWNER, "t1"))
    assert [r.id for r in listed] == [r.id for r in kept]
    assert run(artifacts.thread_files(INTRUDER, "t1")) == []
    assert run(artifacts.load_workspace(INTRUDER, "t1")) == {}
    assert run(artifacts.load_workspace(OWNER, "t1")) == {
        "data.csv": b"1,2\n",
        "output/a.png": b"p",
    }

    run(artifacts.delete_thread(INTRUDER, "t1"))  # another's thread of the same id: nothing
    assert len(run(artifacts.thread_files(OWNER, "t1"))) == 2
    run(artifacts.delete_thread(OWNER, "t1"))
    assert run(artifacts.thread_files(OWNER, "t1")) == []
    assert run(artifacts.load_workspace(OWNER, "t1")) == {}
    assert all(run(artifacts.open(OWNER, r.id)) is None for r in kept)


def test_a_store_that_cannot_be_reached_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws_env(monkeypatch)
    down = Artifacts(S3Blobs("files", endpoint_url="http://127.0.0.1:9"))
    with pytest.raises(FilesUnavailable):
        run(down.keep(OWNER, [Made("a.txt", b"x")]))
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the directory should be")
    with pytest.raises(FilesUnavailable):
        run(Artifacts(DirectoryBlobs(blocked)).keep(OWNER, [Made("a.txt", b"x")]))


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    local = artifacts_from_env({"AGENTLOOP_FILES_DIR": str(tmp_path)})
    assert isinstance(local.blobs, DirectoryBlobs)
    deployed = artifacts_from_env(
        {"AGENTLOOP_FILES_BUCKET": "b", "AGENTLOOP_FILE_URL_TTL_S": "120"}
    )
    assert isinstance(deployed.blobs, S3Blobs)
    assert deployed.url_ttl_s == 120
    for bad in ("0", "59", "604801", "soon"):
        with pytest.raises(ConfigurationError, match="AGENTLOOP_FILE_URL_TTL_S"):
            artifacts_from_env({"AGENTLOOP_FILE_URL_TTL_S": bad})


def test_deployed_the_owner_is_redirected_to_a_fresh_presigned_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: Moto
) -> None:
    aws_env(monkeypatch)
    bucket = f"files-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_server.endpoint).create_bucket(Bucket=bucket)
    artifacts = Artifacts(S3Blobs(bucket, endpoint_url=moto_server.endpoint))
    with ThreadedApp(tmp_path, "files-s3") as app:
        app.app.state.files = artifacts  # type: ignore[attr-defined]
        [ref] = run(artifacts.keep("key:someone-else", [Made("chart.png", tiny_png())]))
        mine = run(_owner_file(artifacts))
        answer = app.call("GET", f"/files/{mine}", follow_redirects=False)
        assert answer.status_code == 307
        assert httpx.get(answer.headers["location"], timeout=10).content == tiny_png()
        assert app.call("GET", f"/files/{mine}", OTHER, follow_redirects=False).status_code == 404
        assert app.call("GET", f"/files/{ref.id}", follow_redirects=False).status_code == 404
        signed = app.call("GET", f"/files/{mine}?expires=1&signature={'0' * 64}")
        assert signed.status_code == 403


async def _owner_file(artifacts: Artifacts) -> str:
    """A file kept for ``TOKEN``'s principal."""
    [ref] = await artifacts.keep(PRINCIPAL.id, [Made("chart.png", tiny_png())])
    return ref.id
