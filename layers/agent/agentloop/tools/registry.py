"""The set of tools a server offers, and the subset one run may use."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from agentloop.tools.base import Tool


class UnknownToolError(ValueError):
    """A request named a tool this server does not have."""


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.add(item)

    def add(self, item: Tool) -> None:
        if item.name in self._tools:
            raise ValueError(f"tool {item.name!r} is registered twice")
        self._tools[item.name] = item

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def select(self, names: Sequence[str] | None) -> ToolRegistry:
        """The tools a run offers: ``names`` in that order, or every tool that is not opt-in."""
        if names is None:
            return ToolRegistry(t for t in self if not t.opt_in)
        unknown = [n for n in names if n not in self._tools]
        if unknown:
            available = ", ".join(self.names) or "none"
            raise UnknownToolError(f"unknown tool(s) {unknown}; available: {available}")
        return ToolRegistry(self._tools[n] for n in dict.fromkeys(names))

    def without(self, *names: str) -> ToolRegistry:
        return ToolRegistry(t for t in self if t.name not in names)

    def definitions(self) -> list[dict[str, Any]]:
        return [t.definition for t in self]
