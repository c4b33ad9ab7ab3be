"""Refuse requests for Host names the server does not answer to (a DNS-rebinding defence).

A page on another site can rebind its own name to 127.0.0.1 and have the browser send
requests, with ``Host: <its name>``, to a local server that has auth off. Checking the Host
header is what tells those requests apart: locally, only loopback names (and the ones in
``AGENTLOOP_ALLOWED_HOSTS``) are served. On Lambda the Function URL's name is not known in
advance, so there the check is off unless ``AGENTLOOP_ALLOWED_HOSTS`` is set.

Framework-free ASGI (the layer does not depend on Starlette); refusals use the same JSON
error shape as every other error (``http_api.HttpError``).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from agentloop.config import ConfigurationError
from agentloop.http_api import HttpError

logger = logging.getLogger("agentloop.host_check")

ENV_VAR = "AGENTLOOP_ALLOWED_HOSTS"

LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
"""Always accepted: ``make dev`` listens on 127.0.0.1, and Lambda Web Adapter's readiness
check asks ``http://127.0.0.1:PORT/healthz``."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_MAX_SHOWN = 100  # characters of a refused Host header shown in answers and logs


@dataclass(frozen=True)
class AllowedHosts:
    """Host names (ports ignored) the server answers to; ``*.example.com`` means subdomains."""

    names: tuple[str, ...]

    def allows(self, name: str) -> bool:
        """Starlette's ``TrustedHostMiddleware`` semantics, for one normalized name."""
        for pattern in self.names:
            if pattern.startswith("*."):
                if name.endswith(pattern[1:]):
                    return True
            elif name == pattern:
                return True
        return False

    def check(self, host_headers: list[str]) -> HttpError | None:
        """None when the request's Host header is one of ours, else the error to answer."""
        if len(host_headers) > 1:
            return HttpError(400, "invalid_host", "the request has more than one Host header")
        raw = host_headers[0].strip() if host_headers else ""
        if not raw:
            return HttpError(
                400, "invalid_host", f"the request has no Host header; {self._advice()}"
            )
        shown = raw[:_MAX_SHOWN]
        name = host_name(raw)
        if name is None:
            return HttpError(400, "invalid_host", f"malformed Host header {shown!r}")
        if not self.allows(name):
            return HttpError(
                421,
                "host_not_allowed",
                f"this server does not answer to Host {shown!r}; {self._advice()}",
            )
        return None

    def _advice(self) -> str:
        accepted = ", ".join(self.names)
        return (
            f"it accepts {accepted}; to use another name, add it to {ENV_VAR} "
            "(comma-separated host names, *.example.com for subdomains)"
        )


def host_name(header: str) -> str | None:
    """The name in a Host header value, lowercased, without port or brackets; None if malformed.

    ``[::1]:8000`` -> ``::1``; ``LocalHost:8000`` -> ``localhost``; ``localhost.`` ->
    ``localhost``. An IPv6 address outside brackets is malformed (RFC 3986), so ``::1``
    alone is refused rather than guessed at.
    """
    value = header.strip().lower()
    if value.startswith("["):
        inside, closed, after = value[1:].partition("]")
        name = _ipv6(inside)
        if not closed or name is None or (after and not after.startswith(":")):
            return None
        port = after[1:]
    else:
        name, _, port = value.partition(":")
        name = name.removesuffix(".")
        if not _NAME.fullmatch(name):
            return None
    if port and not (port.isascii() and port.isdigit()):
        return None
    return name


def _ipv6(text: str) -> str | None:
    """The canonical form of an IPv6 address (``0:0::1`` -> ``::1``), None if it is not one."""
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        return None


def parse_allowed_hosts(raw: str) -> tuple[str, ...]:
    """``AGENTLOOP_ALLOWED_HOSTS`` as normalized names; a ConfigurationError names a bad one."""
    names: list[str] = []
    for item in raw.split(","):
        entry = item.strip().lower()
        if not entry:
            continue
        bracketed = entry.startswith("[") and entry.endswith("]")
        name = _ipv6(entry[1:-1] if bracketed else entry)
        if name is None:
            name = entry.removesuffix(".")
            if not _NAME.fullmatch(name.removeprefix("*.")):
                raise ConfigurationError(
                    f"{ENV_VAR}: {item.strip()!r} is not a host name; give names only, "
                    "without scheme or port, comma-separated (a leading *. accepts every "
                    "subdomain)"
                )
        names.append(name)
    return tuple(names)


def allowed_hosts_for(configured: tuple[str, ...], *, on_lambda: bool) -> AllowedHosts | None:
    """The loopback names and ``configured`` (parsed already); None on Lambda with none set:
    there the Function URL's name is not known in advance."""
    if on_lambda and not configured:
        return None
    return AllowedHosts(names=tuple(dict.fromkeys((*LOOPBACK_HOSTS, *configured))))


def describe_hosts(allowed: AllowedHosts | None) -> str:
    """One start-up log line saying which Host names are served."""
    if allowed is None:
        return f"Host check off (on Lambda with no {ENV_VAR}): any Host name is served"
    return f"accepting Host names: {', '.join(allowed.names)} (add more with {ENV_VAR})"


def _host_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[str]:
    return [value.decode("latin-1") for key, value in headers if key.lower() == b"host"]


class HostCheckMiddleware:
    """Answers HTTP requests for a Host not in ``allowed`` with a JSON 400/421; runs nothing.

    A WebSocket for a wrong Host is closed before it is accepted (the app has no WebSocket
    routes, but a refusal should not depend on that); lifespan passes through.
    """

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        hosts = _host_headers(scope.get("headers", ()))
        error = self.allowed.check(hosts)
        if error is None:
            await self.app(scope, receive, send)
            return
        # %r: both come from the request, and must not forge log lines.
        logger.warning(
            "refused %s with Host %r: %d %s",
            repr(scope.get("path", ""))[:_MAX_SHOWN],
            [h[:_MAX_SHOWN] for h in hosts],
            error.status,
            error.type,
        )
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "host not allowed"})
            return
        # Byte for byte what Starlette's JSONResponse sends for the app's other errors.
        body = json.dumps(error.body(), ensure_ascii=False, separators=(",", ":")).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
