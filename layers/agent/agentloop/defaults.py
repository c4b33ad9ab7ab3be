"""The tools a server offers by default: the built-in tools and ``ask_llm``.

Built here, one layer above the tools, because ``ask_llm`` starts nested runs through the
chat handler: the tools layer never imports it.
"""

from __future__ import annotations

from agentloop.ask_llm import ask_llm_tool
from agentloop.tools.builtin import builtin_tools
from agentloop.tools.registry import ToolRegistry


def default_registry() -> ToolRegistry:
    """Every built-in tool; ``ask_llm`` is opt-in (a request must name it).

    Built when the app starts (after provider keys are copied from the secret);
    ``execute_code`` uses the sandbox function when ``AGENTLOOP_SANDBOX_FUNCTION`` is set, and
    is left out where local code could not be isolated (the log says why and what to do).
    """
    return ToolRegistry([*builtin_tools(), ask_llm_tool()])
