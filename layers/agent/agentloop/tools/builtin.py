"""The tools a server offers by default."""

from __future__ import annotations

from agentloop.tools.registry import ToolRegistry


def default_registry() -> ToolRegistry:
    """Every built-in tool (search_web, scrape and execute_code are still to come)."""
    return ToolRegistry()
