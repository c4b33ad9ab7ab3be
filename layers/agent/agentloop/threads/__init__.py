"""Conversations kept on the server: threads owned by principals, in the store.

``ThreadStore`` (``store.py``) creates, lists, reads, renames and deletes a principal's
threads, appends a run's messages to one, and lets one run at a time claim it (``lock.py``).
``keys.py`` says where each item lives and ``segments.py`` how messages are cut to fit an
item. ``AGENTLOOP_THREAD_TTL_DAYS`` (default 30) is how long a thread is kept after its last
append.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from agentloop.config import ConfigurationError
from agentloop.store import Store, store_from_env
from agentloop.threads.errors import (
    InvalidThreadInput,
    ThreadBusy,
    ThreadError,
    ThreadExists,
    ThreadMovedOn,
    ThreadNotFound,
)
from agentloop.threads.info import MAX_TITLE_CHARS, ThreadInfo
from agentloop.threads.store import DEFAULT_TTL_DAYS, Thread, ThreadPage, ThreadStore

__all__ = [
    "MAX_TITLE_CHARS",
    "TTL_ENV",
    "InvalidThreadInput",
    "Thread",
    "ThreadBusy",
    "ThreadError",
    "ThreadExists",
    "ThreadInfo",
    "ThreadMovedOn",
    "ThreadNotFound",
    "ThreadPage",
    "ThreadStore",
    "threads_from_env",
    "ttl_days_from_env",
]

TTL_ENV = "AGENTLOOP_THREAD_TTL_DAYS"
MAX_TTL_DAYS = 3650


def ttl_days_from_env(environ: Mapping[str, str] | None = None) -> int:
    """``AGENTLOOP_THREAD_TTL_DAYS``: whole days, 1 to 3650 (unset: 30)."""
    raw = (os.environ if environ is None else environ).get(TTL_ENV, "").strip()
    if not raw:
        return DEFAULT_TTL_DAYS
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_TTL_DAYS:
        raise ConfigurationError(f"{TTL_ENV}: {raw!r} is not a whole number of days, 1 to 3650")
    return int(raw)


def threads_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    store: Store | None = None,
    clock: Callable[[], float] = time.time,
) -> ThreadStore:
    """Threads on ``store`` (unset: ``AGENTLOOP_STORE``'s), kept ``AGENTLOOP_THREAD_TTL_DAYS``."""
    store = store_from_env(environ, clock=clock) if store is None else store
    return ThreadStore(store, ttl_days=ttl_days_from_env(environ), clock=clock)
