"""The tools a server offers by default."""

from __future__ import annotations

from agentloop.tools.registry import ToolRegistry


def default_registry() -> ToolRegistry:
    """Every built-in tool; ``ask_llm`` is opt-in (a request must name it)."""
    from agentloop.ask_llm import ask_llm_tool

    return ToolRegistry([ask_llm_tool()])
