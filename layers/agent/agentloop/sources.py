"""The web pages a run used: the pages it read and the search results it got back.

One collector serves ``done.sources`` and the research report: both feed it a run's tool
events in the order the stream carries them (the loop its own and its sub-agents' as they
happen, the report a whole transcript), so both say the same thing about the same run.

Used means: a ``scrape`` that returned a page (its URL after redirects, its title) or a
``search_web`` that returned results (each result's URL and title). A failed call adds no
source; a page that could not be read is kept apart, for the report to say so. Titles and
URLs come from web pages and search APIs, which are hostile input: only absolute http(s)
URLs are kept, control and format characters are removed, both are bounded in length, and
the list itself is bounded.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from typing import Any

from agentloop.events import Source, SourceKind, ToolCallResult, ToolCallStart, _Event
from agentloop.net.urls import usable_url

MAX_SOURCES = 50
"""Sources one ``done`` carries at most (a report may keep more)."""
MAX_URL_CHARS = 2_048
MAX_TITLE_CHARS = 300

READ_TOOL = "scrape"
SEARCH_TOOL = "search_web"


class SourceCollector:
    """Sources in order of first use, each URL once; feed it events with :meth:`see`.

    At the limit a page read still gets in, in place of the latest search result: what the
    run read matters more than what a search listed.
    """

    def __init__(self, limit: int = MAX_SOURCES) -> None:
        self.limit = limit
        self._sources: dict[str, Source] = {}
        self._unread: dict[str, None] = {}
        self._asked: dict[tuple[str, str], str | None] = {}
        """The URL each ``scrape`` call in flight asked for, by (run id, call id)."""

    def see(self, event: _Event) -> None:
        """Take in one event of the run or of its sub-agents (others are ignored)."""
        if isinstance(event, ToolCallStart) and event.name == READ_TOOL:
            self._asked[(event.run_id, event.call_id)] = _argument_url(event.arguments)
        elif isinstance(event, ToolCallResult):
            asked = self._asked.pop((event.run_id, event.call_id), None)
            if event.name == READ_TOOL:
                self._read(event, asked)
            elif event.name == SEARCH_TOOL and event.ok:
                self._searched(event)

    def sources(self) -> list[Source]:
        """The sources so far, in order of first use (copies: the caller may keep them)."""
        return [source.model_copy() for source in self._sources.values()]

    def unread(self) -> list[str]:
        """Pages the run tried to read but could not (and never read later)."""
        return list(self._unread)

    def _read(self, event: ToolCallResult, asked: str | None) -> None:
        if not event.ok:
            url = clean_url(asked)
            known = self._sources.get(url) if url is not None else None
            read = known is not None and known.kind == "read"
            if url is not None and not read and len(self._unread) < self.limit:
                self._unread[url] = None
            return
        page = _result(event.content)
        if isinstance(page, dict):  # else a result cut to text: the page asked for, untitled
            url = clean_url(page.get("final_url")) or clean_url(page.get("url"))
            title = clean_title(page.get("title"))
        else:
            url, title = clean_url(asked), None
        if url is not None:
            self._unread.pop(url, None)
            self._add(url, title, "read")

    def _searched(self, event: ToolCallResult) -> None:
        found = _result(event.content)
        hits = found.get("results") if isinstance(found, dict) else None
        for hit in hits if isinstance(hits, list) else ():
            if isinstance(hit, dict) and (url := clean_url(hit.get("url"))) is not None:
                self._add(url, clean_title(hit.get("title")), "search")

    def _add(self, url: str, title: str | None, kind: SourceKind) -> None:
        known = self._sources.get(url)
        if known is not None:
            if kind == "read" and known.kind == "search":  # then read: it keeps its place
                known.kind = "read"
                known.title = title or known.title
            return
        if len(self._sources) >= self.limit and not (kind == "read" and self._make_room()):
            return
        self._sources[url] = Source(url=url, title=title, kind=kind)

    def _make_room(self) -> bool:
        """Drop the latest search result to make room for a page read; False: none."""
        for url in reversed(self._sources):
            if self._sources[url].kind == "search":
                del self._sources[url]
                return True
        return False


def collect(events: Iterable[_Event], limit: int = MAX_SOURCES) -> SourceCollector:
    """A collector that has seen ``events``."""
    collector = SourceCollector(limit)
    for event in events:
        collector.see(event)
    return collector


def clean_url(value: object) -> str | None:
    """``value`` if it is an absolute http(s) URL of sane length with nothing hidden in it."""
    if not isinstance(value, str):
        return None
    url = value.strip()
    if not url or len(url) > MAX_URL_CHARS or any(_hidden(c) or c.isspace() for c in url):
        return None
    return usable_url(url)


def clean_title(value: object) -> str | None:
    """A title fit to show as one line of text: no control or format characters, whitespace
    collapsed, at most :data:`MAX_TITLE_CHARS` characters; None when nothing is left."""
    if not isinstance(value, str):
        return None
    text = " ".join("".join(" " if _hidden(c) else c for c in value).split())
    if len(text) > MAX_TITLE_CHARS:
        text = text[: MAX_TITLE_CHARS - 1].rstrip() + "\u2026"
    return text or None


def _hidden(char: str) -> bool:
    """Control, format (bidi overrides, zero-width), surrogate, private or unassigned."""
    return unicodedata.category(char).startswith("C")


def _argument_url(arguments: str) -> str | None:
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    url = value.get("url") if isinstance(value, dict) else None
    return url if isinstance(url, str) else None


def _result(content: str) -> Any:
    """The ``result`` of a tool's ``{"ok": true, "result": ...}`` envelope; None otherwise."""
    try:
        envelope = json.loads(content)
    except ValueError:
        return None
    return envelope.get("result") if isinstance(envelope, dict) else None
