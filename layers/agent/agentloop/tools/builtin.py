"""The tools a server offers by default."""

from __future__ import annotations

from agentloop.tools.registry import ToolRegistry


def default_registry() -> ToolRegistry:
    """Every built-in tool; ``ask_llm`` is opt-in (a request must name it).

    Each tool reads its own settings from the environment when it runs, so keys the
    chat app copies from the project secret at start-up are seen.
    """
    from agentloop.ask_llm import ask_llm_tool
    from agentloop.tools.search import search_web_tool

    return ToolRegistry([search_web_tool(), ask_llm_tool()])
