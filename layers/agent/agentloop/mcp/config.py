"""``AGENTLOOP_MCP_SERVERS``: the MCP servers whose tools join the registry.

The shape MCP clients already use: ``{"name": {"url": "https://...", "headers": {...}}}``.
A header value is the value itself, or ``{"secret": "KEY"}``: the value of ``KEY`` in the
project's secret (``AGENTLOOP_SECRET_ID``), else the environment variable ``KEY`` (locally),
so a token never has to sit in the function's environment. Nothing here imports ``mcp``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloop.config import ConfigurationError

ENV = "AGENTLOOP_MCP_SERVERS"
SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")
"""Letters, digits, ``-`` and single ``_``: ``__`` separates the server from the tool."""


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # may hold secrets


def servers_from_env(
    environ: Mapping[str, str] | None = None, secret: Mapping[str, Any] | None = None
) -> list[McpServerConfig]:
    """The configured servers (none when the variable is unset or empty)."""
    env = os.environ if environ is None else environ
    text = env.get(ENV, "").strip()
    if not text:
        return []
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{ENV} is not JSON: {exc.msg}") from exc
    if isinstance(raw, dict) and isinstance(raw.get("mcpServers"), dict):
        raw = raw["mcpServers"]  # the file format some clients use, pasted whole
    if not isinstance(raw, dict):
        raise ConfigurationError(f'{ENV} must be an object: {{"name": {{"url": ...}}}}')
    return [_server(name, spec, env, secret or {}) for name, spec in raw.items()]


def _server(
    name: str, spec: Any, env: Mapping[str, str], secret: Mapping[str, Any]
) -> McpServerConfig:
    where = f"{ENV}[{name!r}]"
    if not SERVER_NAME.match(name) or len(name) > 30:
        raise ConfigurationError(
            f"{where}: a server name is letters, digits, '-' and single '_' (at most 30)"
        )
    if not isinstance(spec, dict):
        raise ConfigurationError(f'{where} must be an object with "url"')
    url = spec.get("url")
    if not isinstance(url, str) or not re.match(r"^https?://", url):
        raise ConfigurationError(f"{where}.url must be an http(s) URL")
    unknown = set(spec) - {"url", "headers", "type", "transport"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown field(s) {sorted(unknown)}")
    kind = spec.get("type", spec.get("transport", "http"))
    if kind not in ("http", "streamable-http", "streamableHttp", "streamable_http"):
        raise ConfigurationError(f"{where}: only Streamable HTTP servers are supported")
    headers = spec.get("headers", {})
    if not isinstance(headers, dict):
        raise ConfigurationError(f"{where}.headers must be an object")
    resolved = {
        str(key): _header(f"{where}.headers[{key!r}]", value, env, secret)
        for key, value in headers.items()
    }
    return McpServerConfig(name=name, url=url, headers=resolved)


def _header(where: str, value: Any, env: Mapping[str, str], secret: Mapping[str, Any]) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"secret"} and isinstance(value["secret"], str):
        key = value["secret"]
        found = secret.get(key)
        if isinstance(found, str) and found:
            return found
        if env.get(key):
            return env[key]
        raise ConfigurationError(
            f"{where} names {key!r}, which is neither in the project's secret nor set"
        )
    raise ConfigurationError(f'{where} must be a string or {{"secret": "KEY"}}')
