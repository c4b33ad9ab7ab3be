"""The tools a server offers by default."""

from __future__ import annotations

from agentloop.tools.registry import ToolRegistry


def default_registry() -> ToolRegistry:
    """Every built-in tool; ``ask_llm`` is opt-in (a request must name it).

    Built when the app starts (after provider keys are copied from the secret);
    ``execute_code`` uses the sandbox function when ``AGENTLOOP_SANDBOX_FUNCTION`` is set.
    """
    from agentloop.ask_llm import ask_llm_tool
    from agentloop.tools.execute_code import execute_code_tool
    from agentloop.tools.scrape import scrape_tool
    from agentloop.tools.search import search_web_tool

    return ToolRegistry([search_web_tool(), scrape_tool(), execute_code_tool(), ask_llm_tool()])
