"""SSRF-safe HTTP GET for URLs chosen by a model.

A model can be talked (by a page it read, or by a user) into fetching
``http://169.254.169.254/latest/meta-data/`` or an address inside the VPC, so every
request goes through the same checks, and so does every redirect:

* only ``http``/``https``, only ports 80/443, no ``user:password@``, a host present;
* the host is resolved once and *every* address it resolves to must be global: loopback,
  private, link-local and cloud metadata, carrier-grade NAT, multicast, reserved and
  unspecified ranges are refused, and so is every other range the IANA special-purpose
  registries list as not globally reachable. An IPv6 form that carries an IPv4 address
  (IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64, 6to4, Teredo) is judged by that
  address first. Numeric hosts in forms other than dotted-quad (``2130706433``,
  ``0x7f.1``) are refused, naming the address they stand for;
* the connection goes to the address that was checked (no second DNS lookup, so DNS
  rebinding cannot swap it), while the ``Host`` header, TLS SNI and certificate check keep
  the hostname;
* at most five redirects, each checked like the first URL; a ``Location`` that is not an
  http(s) URL with a host (``javascript:``, ``data:``, ``http:///x``, malformed, over-long)
  ends the fetch with a :class:`FetchError` saying so;
* only ``text/html``, ``text/plain`` and ``application/xhtml+xml`` bodies, decompressed by
  this module with a bound on the *decompressed* size (a gzip bomb stops at the cap), and
  read up to ``max_bytes``: a longer body is cut there and flagged ``truncated`` (a long
  page's start is still worth reading; the cap bounds memory either way);
* text decoded from a BOM, the header's charset, an HTML ``<meta charset>`` or else UTF-8
  with replacement characters; a charset that is not a web text encoding (unknown,
  ``rot13``, ``base64``) is passed over, not an error;
* a connect timeout per attempt and a total timeout for everything.

Whatever goes wrong comes out as :class:`FetchError` (a refusal as :class:`FetchRefused`).

``FetchPolicy.allow_loopback`` exists for tests, whose fixture servers listen on
127.0.0.1 at random ports: it admits loopback addresses (on any port) and nothing else.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import logging
import re
import socket
import ssl
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CONTENT_TYPES",
    "FetchError",
    "FetchPolicy",
    "FetchRefused",
    "FetchResult",
    "Resolver",
    "SafeFetcher",
    "check_address",
    "safe_fetch",
    "system_resolve",
]

Address = IPv4Address | IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses``: the seam tests use to choose what a name resolves to."""

DEFAULT_CONTENT_TYPES = frozenset({"text/html", "text/plain", "application/xhtml+xml"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_URL_CHARS = 4096
_MAX_ATTEMPTS = 3  # addresses of one host tried in turn when a connection fails
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+))*\.?", re.I)
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([a-zA-Z0-9_.:-]+)", re.I)

_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*):")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?", re.I)

_REDIRECT_HINT = "the page redirects somewhere that cannot be fetched; try another source"
_URL_HINT = "check the URL; only public http(s) pages can be fetched"
_METADATA = "a link-local/metadata address"
_PRIVATE = "a private address"
# First match wins, so the specific entries come before the ranges that contain them.
_V4_RULES: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), why)
    for net, why in (
        ("169.254.169.254/32", _METADATA),  # EC2/ECS/Lambda instance metadata
        ("169.254.170.2/32", _METADATA),  # ECS task credentials
        ("0.0.0.0/8", "an unspecified ('this network') address"),
        ("127.0.0.0/8", "a loopback address"),
        ("10.0.0.0/8", _PRIVATE),
        ("172.16.0.0/12", _PRIVATE),
        ("192.168.0.0/16", _PRIVATE),
        ("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
        ("169.254.0.0/16", "a link-local address"),
        ("192.0.0.0/24", "an IETF protocol assignment address"),
        ("192.0.2.0/24", "a documentation address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("192.88.99.0/24", "a deprecated 6to4 relay anycast address"),
        ("224.0.0.0/4", "a multicast address"),
        ("255.255.255.255/32", "a broadcast address"),
        ("240.0.0.0/4", "a reserved address"),
    )
)
_V6_RULES: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), why)
    for net, why in (
        ("fd00:ec2::254/128", _METADATA),  # instance metadata over IPv6 (Nitro)
        ("fd00:ec2::23/128", _METADATA),  # ECS/EKS pod credentials over IPv6
        ("fc00::/7", "a private (unique local) address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
        ("64:ff9b:1::/48", "a local-use NAT64 address"),
        ("2001:2::/48", "a benchmarking address"),
        ("2001::/23", "an IETF protocol assignment address"),
        ("2001:db8::/32", "a documentation address"),
        ("3fff::/20", "a documentation address"),
        ("100::/64", "a discard-only address"),
        ("100:0:0:1::/64", "a dummy address"),
        ("5f00::/16", "a segment routing (SRv6) address"),
    )
)
_LOOPBACK_V4 = IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = IPv6Address("::1")
_UNSPECIFIED_V6 = IPv6Address("::")
_LOW32 = 0xFFFFFFFF
# IPv6 forms that carry an IPv4 address. Each is judged by that address first. Only NAT64's
# well-known prefix is then admitted (DNS64 networks hand it out for every IPv4-only site);
# the others are refused whatever they carry: Python 3.11 calls the mapped form and 3.13 the
# 6to4 form non-global, both call the translated form global, and no public site is
# reachable only through any of them.
_MAPPED = IPv6Network("::ffff:0:0/96")  # the OS connects to the IPv4 address itself
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")  # RFC 6145/6052 SIIT, not the mapped form
_COMPATIBLE = IPv6Network("::/96")  # deprecated by RFC 4291
_NAT64 = IPv6Network("64:ff9b::/96")  # RFC 6052, globally reachable
_SIX_TO_FOUR = IPv6Network("2002::/16")  # 6to4: the IPv4 address in bits 16-47
_TEREDO = IPv6Network("2001::/32")  # server in bits 32-63, client (inverted) in the last 32


class FetchError(Exception):
    """A fetch that failed in a way worth telling the model; ``hint`` says what to try."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class FetchRefused(FetchError):
    """The URL (or a redirect) points somewhere this fetcher will not go."""

    def __init__(self, message: str, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.reason = reason


class FetchPolicy(BaseModel):
    """Where and how much a fetch may go. The defaults are the production rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow_loopback: bool = Field(
        default=False,
        description="Tests only: admit loopback addresses, on any port. Never private ranges.",
    )
    ports: frozenset[int] = frozenset({80, 443})
    max_redirects: int = Field(default=5, ge=0, le=5)
    max_bytes: int = Field(default=2_000_000, ge=1, description="Cap on the decompressed body.")
    connect_timeout_s: float = Field(default=5.0, gt=0)
    total_timeout_s: float = Field(default=20.0, gt=0)
    content_types: frozenset[str] = DEFAULT_CONTENT_TYPES
    user_agent: str = "agentloop-scrape/0.1"


@dataclass(frozen=True)
class FetchResult:
    url: str
    final_url: str
    status: int
    content_type: str
    charset: str
    text: str
    truncated: bool  # the body went past max_bytes and was cut there
    redirects: tuple[str, ...]
    address: str  # the IP address the final response came from


# -- address checks -------------------------------------------------------------------------


def check_address(address: Address, *, allow_loopback: bool = False) -> str | None:
    """Why ``address`` must not be fetched from (``"a private address"``), or None if global.

    The named ranges give the reason a message states; past them, whatever Python's
    ``ipaddress`` does not call global (or calls reserved) is refused too, and the explicit
    tables keep the answer the same on Python versions whose lists differ.
    """
    if allow_loopback and _is_plain_loopback(address):
        return None
    if isinstance(address, IPv4Address):
        for net4, why in _V4_RULES:
            if address in net4:
                return why
    else:
        if address == _LOOPBACK_V6:
            return "a loopback address"
        if address == _UNSPECIFIED_V6:
            return "an unspecified address"
        embedded = _embedded_v4(address)
        if embedded is not None:
            carried, form_why = embedded
            for v4 in carried:
                inner = check_address(v4)
                if inner is not None:
                    return f"an address embedding {v4}, {inner}"
            return form_why
        for net6, why in _V6_RULES:
            if address in net6:
                return why
    if address.is_multicast:
        return "a multicast address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a globally routable address"
    return None


def _is_plain_loopback(address: Address) -> bool:
    """127.0.0.0/8 or ::1 as such (``is_loopback`` of an IPv4-mapped form varies by Python)."""
    if isinstance(address, IPv4Address):
        return address in _LOOPBACK_V4
    return address == _LOOPBACK_V6


def _embedded_v4(address: IPv6Address) -> tuple[tuple[IPv4Address, ...], str | None] | None:
    """The IPv4 addresses an IPv6 form carries, and why the form is refused anyway (or None).

    The translated range lies inside the compatible one, so it is tested first.
    """
    value = int(address)
    low = IPv4Address(value & _LOW32)
    if address in _NAT64:
        return (low,), None
    if address in _MAPPED:
        return (low,), "an IPv4-mapped address"
    if address in _TRANSLATED:
        return (low,), "an IPv4-translated (SIIT) address"
    if address in _COMPATIBLE:
        return (low,), "an IPv4-compatible (deprecated) address"
    if address in _SIX_TO_FOUR:
        return (IPv4Address((value >> 80) & _LOW32),), "a 6to4 address"
    if address in _TEREDO:
        server = IPv4Address((value >> 64) & _LOW32)
        client = IPv4Address(~value & _LOW32)
        return (server, client), "a Teredo tunnel address"
    return None


def _parse_address(text: str) -> Address | None:
    try:
        return ip_address(text.split("%", 1)[0])  # drop an IPv6 scope id
    except ValueError:
        return None


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the operating system's resolver gives for ``host``."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


# -- the fetcher ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _default_ssl_context() -> ssl.SSLContext:
    """Built once: loading the CA bundle costs tens of milliseconds."""
    return httpx.create_ssl_context()


@dataclass(frozen=True)
class _Target:
    url: httpx.URL
    host: str  # ASCII (IDNA) form, as sent in SNI
    addresses: tuple[Address, ...]
    literal: bool  # the URL's host was an IP address


@dataclass(frozen=True)
class _Redirect:
    location: str


class SafeFetcher:
    """Fetches text pages under a :class:`FetchPolicy`; one instance can serve many fetches."""

    def __init__(
        self,
        policy: FetchPolicy | None = None,
        *,
        resolve: Resolver = system_resolve,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.policy = policy or FetchPolicy()
        self._resolve = resolve
        self._ssl_context = ssl_context

    async def fetch(self, url: str) -> FetchResult:
        """GET ``url`` and its redirects under the policy; raises :class:`FetchError` only."""
        limit = self.policy.total_timeout_s
        try:
            async with asyncio.timeout(limit):
                return await self._fetch(url)
        except FetchError:
            raise
        except TimeoutError:
            raise FetchError(
                f"timed out after {limit:g} s fetching {url}",
                hint="the site is slow or not answering; try another source",
            ) from None
        except Exception as exc:
            # Every known failure is classified above with its own message; this keeps the
            # promise of one error type for what a hostile server finds next, and logs it
            # (chained, so the traceback shows it) to be classified too.
            logger.warning("unclassified failure fetching %s", url, exc_info=True)
            raise FetchError(
                f"fetching {_shown(url)} failed: {type(exc).__name__}: {exc}",
                hint="the page could not be read; try another source",
            ) from exc

    async def _fetch(self, url: str) -> FetchResult:
        """GET ``url``, following redirects: every hop's URL is checked, and its addresses
        resolved and pinned, before it is requested; at most ``max_redirects`` hops."""
        current = _parse_url(url)
        redirects: list[str] = []
        most = self.policy.max_redirects
        for hop in range(most + 1):
            target = await self._check_hop(current, hop)
            outcome = await self._send(target)
            if isinstance(outcome, FetchResult):
                return replace(outcome, url=url, redirects=tuple(redirects))
            if hop == most:
                break
            current = self._follow(current, outcome.location, hop + 1)
            redirects.append(str(current))
        raise FetchError(
            f"too many redirects: {url} redirected more than {most} times",
            hint="the site may be looping; try the final address directly or another source",
        )

    async def _check_hop(self, url: httpx.URL, hop: int) -> _Target:
        """:meth:`_check` for hop ``hop`` (0: the URL asked for, whose errors pass as they
        are); a redirect's failure says which redirect it was."""
        most = self.policy.max_redirects
        try:
            return await self._check(url)
        except FetchRefused as exc:
            if hop == 0:
                raise
            raise FetchRefused(
                f"redirect {hop} of {most} to {url} refused: {exc.reason}",
                exc.reason,
                hint=_REDIRECT_HINT,
            ) from None
        except FetchError as exc:  # an invalid or unresolvable host
            if hop == 0:
                raise
            raise FetchError(
                f"redirect {hop} of {most} to {url} failed: {exc.message}",
                hint=_REDIRECT_HINT,
            ) from None

    def _follow(self, current: httpx.URL, location: str, hop: int) -> httpx.URL:
        """The URL redirect ``hop`` leads to (its form checked; its host is checked when the
        next hop starts), or the error saying why it cannot be followed."""
        most = self.policy.max_redirects
        try:
            return _redirect_url(current, location)
        except _BadLocation as exc:
            raise FetchError(
                f"redirect {hop} of {most} cannot be followed: the Location "
                f"{_shown(location)!r} {exc}",
                hint=_REDIRECT_HINT,
            ) from None
        except FetchRefused as exc:
            raise FetchRefused(
                f"redirect {hop} of {most} to {_shown(location)} refused: {exc.reason}",
                exc.reason,
                hint=_REDIRECT_HINT,
            ) from None

    async def _check(self, url: httpx.URL) -> _Target:
        """Everything about ``url`` that decides whether it may be fetched, addresses included."""
        policy = self.policy
        port = url.port or _DEFAULT_PORTS[url.scheme]
        if not 0 < port < 65536:  # httpx parses any number; connect() would overflow
            raise FetchError(f"port {port} of {str(url)[:200]!r} is not a port", _URL_HINT)
        if port not in policy.ports and not policy.allow_loopback:
            raise _refused(f"port {port} is not allowed (only {_ports(policy.ports)})")
        host = url.raw_host.decode("ascii", errors="replace")
        literal = _literal_address(host)
        if literal is not None:
            addresses: tuple[Address, ...] = (literal,)
        else:
            problem = _host_name_problem(host)
            if problem is not None:
                raise FetchError(f"{host!r} is not a valid host name ({problem})", _URL_HINT)
            addresses = await self._lookup(host, port)
        for address in addresses:
            why = check_address(address, allow_loopback=policy.allow_loopback)
            if why is not None:
                said = f"{address} is" if literal is not None else f"{host} resolves to {address},"
                raise _refused(f"{said} {why}")
        if port not in policy.ports and not all(_is_plain_loopback(a) for a in addresses):
            raise _refused(f"port {port} is not allowed (only {_ports(policy.ports)})")
        return _Target(url=url, host=host, addresses=addresses, literal=literal is not None)

    async def _lookup(self, host: str, port: int) -> tuple[Address, ...]:
        try:
            answers = await self._resolve(host, port)
        except OSError as exc:  # socket.gaierror and friends
            raise FetchError(
                f"could not resolve {host}: {exc.strerror or exc}",
                hint="check the spelling of the host name",
            ) from None
        except UnicodeError as exc:  # the resolver's IDNA step refused the name
            raise FetchError(f"could not resolve {host}: {exc}", _URL_HINT) from None
        addresses: list[Address] = []
        for answer in answers:
            address = _parse_address(answer)
            if address is None:
                raise _refused(f"{host} resolves to {answer!r}, which is not an IP address")
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise FetchError(f"could not resolve {host}: no addresses", hint="check the host name")
        return tuple(addresses)

    async def _send(self, target: _Target) -> FetchResult | _Redirect:
        """One request to the checked addresses, trying the next one if a connection fails."""
        failure: FetchError | None = None
        for address in target.addresses[:_MAX_ATTEMPTS]:
            try:
                return await self._send_to(target, address)
            except httpx.ConnectTimeout:
                failure = FetchError(
                    f"could not connect to {target.host} ({address}): timed out after "
                    f"{self.policy.connect_timeout_s:g} s",
                    hint="the site is not answering; try another source",
                )
            except httpx.ConnectError as exc:
                if _is_tls_failure(exc):
                    raise FetchError(
                        f"TLS with {target.host} failed: {_root_message(exc)}",
                        hint="the site's TLS certificate could not be verified; use another source",
                    ) from None
                failure = FetchError(
                    f"could not connect to {target.host} ({address}): {_root_message(exc)}",
                    hint="the site is not answering; try another source",
                )
            except httpx.TimeoutException:
                raise FetchError(
                    f"{target.host} stopped answering (timed out)",
                    hint="the site is slow; try again later or use another source",
                ) from None
            except httpx.HTTPError as exc:  # after connecting: a broken or malformed response
                raise FetchError(
                    f"reading from {target.host} failed: {_root_message(exc)}",
                    hint="the connection broke; try again or use another source",
                ) from None
        assert failure is not None
        raise failure

    async def _send_to(self, target: _Target, address: Address) -> FetchResult | _Redirect:
        policy = self.policy
        ssl_context = self._ssl_context or _default_ssl_context()
        transport = _PinnedTransport(
            address, ssl_context, sni_hostname=None if target.literal else target.host.rstrip(".")
        )
        timeout = httpx.Timeout(policy.total_timeout_s, connect=policy.connect_timeout_s)
        headers = {
            "User-Agent": policy.user_agent,
            "Accept": "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8",
            "Accept-Encoding": "gzip, deflate",  # only what _BoundedDecoder can bound
        }
        # Straight to a fresh transport, without a client: a pooled connection made for
        # another name must never carry this one, no proxy variable is read, and nothing
        # parses the Location header but _redirect_url (httpx's client does even when not
        # following, and lets InvalidURL and IDNA errors out for javascript: or xn--).
        request = httpx.Request(
            "GET", target.url, headers=headers, extensions={"timeout": timeout.as_dict()}
        )
        async with transport:
            response = await transport.handle_async_request(request)
            try:
                return await self._read(response, target, address)
            finally:
                await response.aclose()

    async def _read(
        self, response: httpx.Response, target: _Target, address: Address
    ) -> FetchResult | _Redirect:
        status = response.status_code
        url = str(target.url.copy_with(fragment=None))
        if status in _REDIRECTS:
            location = response.headers.get("location")
            if not location:
                raise FetchError(f"HTTP {status} from {url} without a Location header")
            return _Redirect(location)
        if not 200 <= status < 300:
            raise FetchError(
                f"HTTP {status} {response.reason_phrase} from {url}", _status_hint(status)
            )
        media_type, charset = _content_type(response.headers.get("content-type", ""))
        if media_type not in self.policy.content_types:
            allowed = ", ".join(sorted(self.policy.content_types))
            shown = media_type or "no content type"
            raise FetchError(
                f"{url} is {shown}, not a text page (only {allowed} are read)",
                hint="this tool reads web pages only; look for an HTML version of the document",
            )
        decoder = _BoundedDecoder(response.headers.get("content-encoding", ""))
        body = bytearray()
        room = self.policy.max_bytes
        truncated = False
        async for raw in response.aiter_raw():
            chunk = decoder.decode(raw, room + 1)  # one byte over the room: the cap was passed
            if len(chunk) > room:
                body += chunk[:room]
                truncated = True
                break
            body += chunk
            room -= len(chunk)
        if not truncated:
            tail = decoder.finish(room + 1)
            truncated = len(tail) > room
            body += tail[:room]
        text, used = _decode_text(bytes(body), charset, media_type)
        return FetchResult(
            url=url,
            final_url=url,
            status=status,
            content_type=media_type,
            charset=used,
            text=text,
            truncated=truncated,
            redirects=(),
            address=str(address),
        )


async def safe_fetch(
    url: str, policy: FetchPolicy | None = None, *, resolve: Resolver = system_resolve
) -> FetchResult:
    """Fetch one URL under ``policy`` (the production defaults when None)."""
    return await SafeFetcher(policy, resolve=resolve).fetch(url)


class _PinnedTransport(httpx.AsyncBaseTransport):
    """Sends each request to one checked address; Host, SNI and certificate keep the name."""

    def __init__(
        self, address: Address, ssl_context: ssl.SSLContext, *, sni_hostname: str | None
    ) -> None:
        self._host = f"[{address}]" if isinstance(address, IPv6Address) else str(address)
        self._sni_hostname = sni_hostname
        self._inner = httpx.AsyncHTTPTransport(verify=ssl_context, retries=0, trust_env=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        extensions = dict(request.extensions)
        if self._sni_hostname is not None:
            # httpcore passes this to the TLS handshake as server_hostname, which is both the
            # SNI sent and the name the certificate is verified against.
            extensions["sni_hostname"] = self._sni_hostname
        pinned = httpx.Request(
            request.method,
            request.url.copy_with(host=self._host),
            headers=request.headers,  # keeps Host: <name>, set from the original URL
            stream=request.stream,
            extensions=extensions,
        )
        return await self._inner.handle_async_request(pinned)

    async def aclose(self) -> None:
        await self._inner.aclose()


# -- helpers --------------------------------------------------------------------------------


def _refused(reason: str) -> FetchRefused:
    return FetchRefused(
        f"refused: {reason}",
        reason,
        hint="only public http(s) pages on ports 80/443 can be fetched",
    )


def _ports(ports: frozenset[int]) -> str:
    return ", ".join(str(p) for p in sorted(ports))


def _parse_url(url: str) -> httpx.URL:
    """The URL if its form is allowed (scheme, userinfo, host); addresses are checked later."""
    if len(url) > _MAX_URL_CHARS:
        raise _refused(f"the URL is longer than {_MAX_URL_CHARS} characters")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:  # IDNA errors are UnicodeErrors
        raise _refused(f"{_shown(url)!r} is not a valid URL ({exc})") from None
    if parsed.scheme not in _DEFAULT_PORTS:
        scheme = parsed.scheme or "no scheme"
        raise _refused(f"scheme {scheme!r} is not allowed (only http and https)")
    if parsed.userinfo:
        raise _refused("URLs with a user name or password (user@host) are not allowed")
    if not parsed.raw_host:
        raise _refused(f"{url!r} has no host")
    return parsed


class _BadLocation(Exception):
    """A Location header that is not a URL this fetcher can follow; the text says why."""


def _redirect_url(current: httpx.URL, location: str) -> httpx.URL:
    """The URL a ``Location`` header leads to, resolved against ``current`` and checked.

    Stricter than a browser on purpose: an absolute Location must be ``http(s)://host...``
    (``http:x``, ``http:///x`` and ``//`` have no host rather than borrowing this one's),
    and control characters or an over-long value end the fetch instead of being guessed at.
    """
    location = location.strip(" \t")
    if not location:
        raise _BadLocation("is empty")
    if len(location) > _MAX_URL_CHARS:
        raise _BadLocation(f"is longer than {_MAX_URL_CHARS} characters")
    if _CONTROL.search(location):
        raise _BadLocation("contains control characters")
    scheme = _SCHEME.match(location)
    if scheme is not None:
        name = scheme.group(1).lower()
        if name not in _DEFAULT_PORTS:
            raise _refused(f"scheme {name!r} is not allowed (only http and https)")
        rest = location[scheme.end() :]
    else:
        rest = location
    has_authority = re.match(r"//[^/?#]", rest) is not None
    if (scheme is not None or rest.startswith("//")) and not has_authority:
        raise _BadLocation("has no host")
    try:
        joined = str(current.join(location))
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        raise _BadLocation(f"is not a valid URL ({exc})") from None
    return _parse_url(joined)


def _shown(text: str, limit: int = 200) -> str:
    """``text`` short enough for a message (a data: URL can be megabytes)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _host_name_problem(host: str) -> str | None:
    """Why ``host`` cannot be a DNS name (checked here so the resolver never sees it)."""
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253:
        return "longer than 253 characters"
    for label in name.split("."):
        if not label:
            return "an empty label"
        if len(label) > 63:
            return "a label longer than 63 characters"
        if not _LABEL.fullmatch(label):
            return f"{label!r} is not letters, digits and inner hyphens"
    return None


def _literal_address(host: str) -> Address | None:
    """The address a numeric host stands for; refuses numeric forms other than the canonical."""
    address = _parse_address(host)
    if address is not None:
        return address
    if ":" in host:
        raise _refused(f"{host!r} is not a valid IPv6 address")
    if _NUMERIC_HOST.fullmatch(host):
        try:
            meant = IPv4Address(socket.inet_aton(host.rstrip(".")))
        except OSError:
            raise _refused(f"{host!r} is neither a host name nor a valid IPv4 address") from None
        why = check_address(meant)
        if why is not None:
            raise _refused(f"{host} means {meant}, {why}")
        raise _refused(f"{host} is a non-canonical way to write {meant}; use {meant} instead")
    return None


def _content_type(header: str) -> tuple[str, str | None]:
    media_type, _, params = header.partition(";")
    charset = None
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip("\"'") or None
    return media_type.strip().lower(), charset


def _decode_text(body: bytes, charset: str | None, media_type: str) -> tuple[str, str]:
    """Text from the BOM, the header's charset, an HTML <meta charset>, or else UTF-8.

    A declared charset is used only when it names a web text encoding: an unknown label
    (``x-unknown-123``), a codec that is not a text encoding (``rot13``, ``base64``) or one
    that fails is passed over for the next candidate, ending at UTF-8 with replacement
    characters - what a browser shows for a page whose label it does not know.
    """
    for bom, name in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if body.startswith(bom):
            return body.decode(name, errors="replace"), name
    candidates = [(charset, False)]
    if media_type != "text/plain":
        match = _META_CHARSET.search(body[:4096])
        if match:
            candidates.append((match.group(1).decode("ascii"), True))
    for label, from_meta in candidates:
        codec = _web_codec(label, from_meta=from_meta) if label else None
        if codec is None:
            continue
        try:
            return body.decode(codec, errors="replace"), label or codec
        except (UnicodeError, LookupError, ValueError):  # a codec that cannot replace
            continue
    return body.decode("utf-8", errors="replace"), "utf-8"


def _web_codec(label: str, *, from_meta: bool) -> str | None:
    """The Python codec for a charset label, if it is an encoding web pages are written in."""
    name = label.strip().lower()
    name = _WEB_ALIASES.get(name, name)
    try:
        codec = codecs.lookup(name).name
    except (LookupError, ValueError, TypeError):  # unknown, or a NUL in the label
        return None
    if codec not in _WEB_CODECS:
        return None
    if from_meta and codec.startswith("utf-16"):
        # A <meta> that could be read as ASCII says the page is not UTF-16 (the HTML
        # standard's prescan turns these labels into UTF-8 for the same reason).
        return "utf-8"
    return codec


# The WHATWG Encoding Standard's encodings, by the name Python's codecs give them (plus
# ASCII and Latin-1, which keep their own meaning here), and the web labels Python lacks.
_WEB_CODECS = frozenset(
    {
        "utf-8",
        "utf-16",
        "utf-16-le",
        "utf-16-be",
        "ascii",
        "cp866",
        *(f"iso8859-{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15, 16)),
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "mac-cyrillic",
        "cp874",
        "tis-620",
        *(f"cp{n}" for n in range(1250, 1259)),
        "gbk",
        "gb2312",
        "gb18030",
        "big5",
        "big5hkscs",
        "euc_jp",
        "iso2022_jp",
        "shift_jis",
        "cp932",
        "euc_kr",
        "cp949",
    }
)
_WEB_ALIASES = {
    "unicode-1-1-utf-8": "utf-8",
    "iso-8859-8-i": "iso8859-8",
    "x-mac-roman": "mac-roman",
    "x-mac-cyrillic": "mac-cyrillic",
    "windows-874": "cp874",
    "x-gbk": "gbk",
    "x-x-big5": "big5hkscs",
    "x-euc-jp": "euc_jp",
    "x-sjis": "shift_jis",
    "windows-31j": "cp932",
}


class _BoundedDecoder:
    """Content-Encoding decoding that never produces more than asked for (no gzip bombs)."""

    def __init__(self, encoding: str) -> None:
        codings = [c.strip().lower() for c in encoding.split(",")]
        codings = [c for c in codings if c and c != "identity"]
        self._kind: Literal["identity", "gzip", "deflate"]
        if not codings:
            self._kind = "identity"
        elif codings in (["gzip"], ["x-gzip"]):
            self._kind = "gzip"
        elif codings == ["deflate"]:
            self._kind = "deflate"
        else:
            raise FetchError(
                f"unsupported Content-Encoding {encoding!r}",
                hint="the server ignored the Accept-Encoding sent; try another source",
            )
        self._z: zlib._Decompress | None = (
            zlib.decompressobj(16 + zlib.MAX_WBITS) if self._kind == "gzip" else None
        )

    def decode(self, data: bytes, limit: int) -> bytes:
        """At most ``limit`` decoded bytes; input beyond that is kept for the next call."""
        if self._kind == "identity":
            return data[:limit]
        if self._z is None:  # deflate: zlib-wrapped as the RFC says, or raw as some servers send
            wrapped = len(data) >= 2 and data[0] & 0x0F == 8 and int.from_bytes(data[:2]) % 31 == 0
            self._z = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        try:
            return self._z.decompress(self._z.unconsumed_tail + data, limit)
        except zlib.error as exc:
            raise FetchError(f"the {self._kind} body could not be decompressed: {exc}") from None

    def finish(self, limit: int) -> bytes:
        """Whatever the decompressor still holds, at most ``limit`` bytes."""
        if self._z is None:
            return b""
        try:
            return self._z.decompress(self._z.unconsumed_tail, limit) + self._z.flush()[:limit]
        except zlib.error as exc:
            raise FetchError(f"the {self._kind} body could not be decompressed: {exc}") from None


def _status_hint(status: int) -> str:
    if status in (401, 403):
        return "the page needs a login or refuses automated clients; try another source"
    if status == 404 or status == 410:
        return "the page does not exist; check the URL or search for it"
    if status == 429:
        return "the site is rate limiting; wait or use another source"
    if status >= 500:
        return "the site failed; try again later or use another source"
    return "the site did not return the page; try another source"


def _is_tls_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(exc)


def _root_message(exc: BaseException) -> str:
    """The innermost exception's text: httpx's wrappers often say nothing themselves."""
    message = str(exc) or type(exc).__name__
    seen = exc.__cause__ or exc.__context__
    while seen is not None:
        if str(seen):
            message = str(seen)
        seen = seen.__cause__ or seen.__context__
    return message
