"""AGENTLOOP_STORE: which store a URL opens, and the URLs refused as a configuration error."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentloop.config import ConfigurationError
from agentloop.store import DEFAULT_STORE_URL, open_store, store_from_env
from agentloop.store.dynamodb import DynamoBackend
from agentloop.store.sqlite import SqliteBackend


def test_unset_is_a_file_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for environ in ({}, {"AGENTLOOP_STORE": "  "}):
        store = store_from_env(environ)
        assert store.url == DEFAULT_STORE_URL
        assert isinstance(store.backend, SqliteBackend)
        assert store.backend.path == tmp_path / ".agentloop" / "store.db"
    assert not (tmp_path / ".agentloop").exists()  # opening touches nothing


def test_sqlite_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = store_from_env({"AGENTLOOP_STORE": "sqlite:///data/s.db"}).backend
    absolute = open_store("sqlite:////var/lib/agentloop/s.db").backend
    assert isinstance(relative, SqliteBackend)
    assert isinstance(absolute, SqliteBackend)
    assert relative.path == tmp_path / "data" / "s.db"
    assert absolute.path == Path("/var/lib/agentloop/s.db")


def test_dynamodb_table() -> None:
    backend = store_from_env(
        {"AGENTLOOP_STORE": "dynamodb://agentloop-AgentStoreTable-1AB2"}
    ).backend
    assert isinstance(backend, DynamoBackend)
    assert backend.table == "agentloop-AgentStoreTable-1AB2"


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://x.db",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:///x.db?mode=ro",
        "dynamodb://",
        "dynamodb://ab",
        "dynamodb://table/extra",
        "dynamodb://table name",
        "redis://localhost",
        "/tmp/store.db",
    ],
)
def test_urls_that_name_no_store(url: str) -> None:
    with pytest.raises(ConfigurationError, match="AGENTLOOP_STORE"):
        store_from_env({"AGENTLOOP_STORE": url})
