"""Tools the model can call: the typed tool definition, the registry and result shaping."""

from agentloop.tools.base import Tool, ToolContext, ToolError, tool
from agentloop.tools.registry import ToolRegistry

__all__ = ["Tool", "ToolContext", "ToolError", "ToolRegistry", "tool"]
