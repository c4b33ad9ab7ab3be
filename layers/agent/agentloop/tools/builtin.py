"""The tools a server offers by default."""

from __future__ import annotations

import logging

from agentloop.tools.base import Tool
from agentloop.tools.registry import ToolRegistry

logger = logging.getLogger(__name__)


def default_registry() -> ToolRegistry:
    """Every built-in tool; ``ask_llm`` is opt-in (a request must name it).

    Built when the app starts (after provider keys are copied from the secret);
    ``execute_code`` uses the sandbox function when ``AGENTLOOP_SANDBOX_FUNCTION`` is set, and
    is left out where local code could not be isolated (the log says why and what to do).
    """
    from agentloop.ask_llm import ask_llm_tool
    from agentloop.sandbox.isolation import IsolationUnavailable
    from agentloop.tools.execute_code import execute_code_tool
    from agentloop.tools.scrape import scrape_tool
    from agentloop.tools.search import search_web_tool

    tools: list[Tool] = [search_web_tool(), scrape_tool()]
    try:
        tools.append(execute_code_tool())
    except IsolationUnavailable as exc:
        logger.warning("execute_code is off: %s", exc)
    return ToolRegistry([*tools, ask_llm_tool()])
