"""The tools a server offers by default: the built-in tools and ``ask_llm``; MCP servers' tools.

Built here, one layer above the tools, because ``ask_llm`` starts nested runs through the
chat handler: the tools layer never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentloop.ask_llm import ask_llm_tool
from agentloop.mcp.config import servers_from_env
from agentloop.tools.builtin import builtin_tools
from agentloop.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentloop.mcp.client import McpTools


def default_registry() -> ToolRegistry:
    """Every built-in tool; ``ask_llm`` is opt-in (a request must name it).

    Built when the app starts (after provider keys are copied from the secret);
    ``execute_code`` uses the sandbox function when ``AGENTLOOP_SANDBOX_FUNCTION`` is set, and
    is left out where local code could not be isolated (the log says why and what to do).
    """
    return ToolRegistry([*builtin_tools(), ask_llm_tool()])


def mcp_tools_from_env(
    registry: ToolRegistry, secret: Mapping[str, Any] | None = None
) -> McpTools | None:
    """The MCP servers of ``AGENTLOOP_MCP_SERVERS``, whose tools join ``registry`` as
    ``server__tool`` once listed; None (and nothing of the ``mcp`` SDK imported) without any.

    Their tools are opt-in like ``ask_llm``: a request names them in ``tools``. A remote
    tool has effects we cannot see, each one's schema costs prompt tokens on every call, and
    the default set must be known without waiting for a server.
    """
    servers = servers_from_env(secret=secret)
    if not servers:
        return None
    from agentloop.mcp.client import McpTools

    return McpTools(servers, registry)
