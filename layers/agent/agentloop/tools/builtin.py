"""The tools this layer builds in: search_web, scrape and (where it can be isolated)
execute_code. The server's default registry, which adds ``ask_llm``, is
:func:`agentloop.defaults.default_registry`."""

from __future__ import annotations

import logging

from agentloop.tools.base import Tool

logger = logging.getLogger(__name__)


def builtin_tools() -> list[Tool]:
    """search_web, scrape and execute_code; execute_code is left out, with a warning saying
    why, where local code could not be isolated."""
    from agentloop.sandbox.isolation import IsolationUnavailable
    from agentloop.tools.execute_code import execute_code_tool
    from agentloop.tools.scrape import scrape_tool
    from agentloop.tools.search import search_web_tool

    tools: list[Tool] = [search_web_tool(), scrape_tool()]
    try:
        tools.append(execute_code_tool())
    except IsolationUnavailable as exc:
        logger.warning("execute_code is off: %s", exc)
    return tools
