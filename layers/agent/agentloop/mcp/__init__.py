"""Tools from remote MCP servers (``AGENTLOOP_MCP_SERVERS``).

``config`` reads the setting without importing the ``mcp`` SDK; ``client`` (which imports it)
is loaded only when at least one server is configured.
"""
