"""One store, embedded (SQLite) or deployed (DynamoDB): ``AGENTLOOP_STORE`` says which.

``sqlite:///path`` (relative to the working directory; ``sqlite:////abs/path`` absolute) or
``dynamodb://table``; unset: ``DEFAULT_STORE_URL``. Opening touches nothing: the file or
the table is first used at the first call, and a store that cannot be used then raises
``StoreUnavailable`` (``store.check()`` tries at once). Neither sqlite3 nor boto3 is
imported until a store of that kind is opened.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentloop.config import ConfigurationError
from agentloop.store.base import (
    Add,
    Conflict,
    Delete,
    InvalidCursor,
    LimitExceeded,
    Op,
    Page,
    Put,
    Record,
    Rejected,
    Store,
    StoreError,
    StoreUnavailable,
)

__all__ = [
    "DEFAULT_STORE_URL",
    "Add",
    "Conflict",
    "Delete",
    "InvalidCursor",
    "LimitExceeded",
    "Op",
    "Page",
    "Put",
    "Record",
    "Rejected",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "open_store",
    "store_from_env",
]

ENV = "AGENTLOOP_STORE"
DEFAULT_STORE_URL = "sqlite:///.agentloop/store.db"
_TABLE = re.compile(r"[A-Za-z0-9_.-]{3,255}")


def store_from_env(
    environ: Mapping[str, str] | None = None, *, clock: Callable[[], float] = time.time
) -> Store:
    """The store ``AGENTLOOP_STORE`` names (ConfigurationError if it names none we know)."""
    env = os.environ if environ is None else environ
    return open_store(env.get(ENV, "").strip() or DEFAULT_STORE_URL, clock=clock)


def open_store(url: str, *, clock: Callable[[], float] = time.time, **options: Any) -> Store:
    """A store for ``url``; ``options`` go to the backend (a DynamoDB ``endpoint_url``)."""
    if url.startswith("sqlite:///"):
        return Store(_sqlite(url, clock, options), url)
    if url.startswith("dynamodb://"):
        table = url.removeprefix("dynamodb://")
        if not _TABLE.fullmatch(table):
            raise ConfigurationError(
                f"{ENV}: {url!r} is not dynamodb://TABLE (3-255 letters, digits, _ . -)"
            )
        from agentloop.store.dynamodb import DynamoBackend

        return Store(DynamoBackend(table, clock=clock, **options), url)
    raise ConfigurationError(f"{ENV}: {url!r} is neither sqlite:///PATH nor dynamodb://TABLE")


def _sqlite(url: str, clock: Callable[[], float], options: dict[str, Any]) -> Any:
    from agentloop.store.sqlite import SqliteBackend

    raw = url.removeprefix("sqlite:///")
    if not raw or raw == ":memory:" or "?" in raw or "\x00" in raw:
        raise ConfigurationError(f"{ENV}: {url!r} needs a file path (sqlite:///PATH)")
    path = Path(raw)
    if not path.is_absolute():  # "sqlite:////abs" leaves "/abs"
        path = Path.cwd() / path
    return SqliteBackend(path, clock=clock, **options)
