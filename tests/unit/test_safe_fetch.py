"""SSRF-safe fetching: the address and URL rules, then real fetches from loopback servers.

Names are resolved through the fetcher's ``resolve`` seam (our own code, not a mocked SDK),
so a test decides what ``pages.example.test`` resolves to; the servers listen on 127.0.0.1
and the tests set ``allow_loopback``, which admits loopback on any port and nothing else.
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import socket
import ssl
import threading
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from ipaddress import IPv4Address, IPv6Address, IPv6Network, ip_address
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from agentloop.net.safe_fetch import (
    FetchError,
    FetchPolicy,
    FetchRefused,
    SafeFetcher,
    check_address,
)
from tests.fakes.loopback import LoopbackServer

ARTICLE = "<html><head><title>Hello</title></head><body><p>Plain page text.</p></body></html>"
TEST_POLICY = FetchPolicy(allow_loopback=True)


class Resolver:
    """A resolver seam that answers from a table and records what it was asked."""

    def __init__(self, table: dict[str, list[str]] | None = None) -> None:
        self.table = table or {}
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


async def no_dns(host: str, port: int) -> Sequence[str]:
    raise AssertionError(f"resolver must not be called (asked for {host}:{port})")


# -- check_address ----------------------------------------------------------------------------

REFUSED_ADDRESSES = [
    ("127.0.0.1", "a loopback address"),
    ("127.8.9.10", "a loopback address"),
    ("::1", "a loopback address"),
    ("10.1.2.3", "a private address"),
    ("172.16.0.1", "a private address"),
    ("172.31.255.254", "a private address"),
    ("192.168.1.1", "a private address"),
    ("169.254.169.254", "a link-local/metadata address"),
    ("169.254.170.2", "a link-local/metadata address"),
    ("fd00:ec2::254", "a link-local/metadata address"),
    ("169.254.10.20", "a link-local address"),
    ("fe80::1", "a link-local address"),
    ("fc00::1", "a private (unique local) address"),
    ("fd12:3456::1", "a private (unique local) address"),
    ("100.64.0.1", "a carrier-grade NAT (shared) address"),
    ("100.127.255.254", "a carrier-grade NAT (shared) address"),
    ("0.0.0.0", "an unspecified ('this network') address"),
    ("::", "an unspecified address"),
    ("224.0.0.1", "a multicast address"),
    ("239.255.255.250", "a multicast address"),
    ("ff02::1", "a multicast address"),
    ("240.0.0.1", "a reserved address"),
    ("255.255.255.255", "a broadcast address"),
    ("192.0.2.10", "a documentation address"),
    ("2001:db8::1", "a documentation address"),
    ("198.18.0.1", "a benchmarking address"),
    ("198.51.100.7", "a documentation address"),
    ("203.0.113.9", "a documentation address"),
    ("192.0.0.170", "an IETF protocol assignment address"),  # NAT64 discovery
    ("192.0.0.9", "an IETF protocol assignment address"),  # PCP anycast: no web pages there
    ("192.88.99.1", "a deprecated 6to4 relay anycast address"),
    ("fec0::1", "a site-local address"),
    ("fd00:ec2::23", "a link-local/metadata address"),
    ("3fff::1", "a documentation address"),  # RFC 9637; Python 3.11 calls it global
    ("2001:2::1", "a benchmarking address"),
    ("2001:1::1", "an IETF protocol assignment address"),
    ("2001:4:112::1", "an IETF protocol assignment address"),
    ("2001:20::1", "an IETF protocol assignment address"),
    ("100::1", "a discard-only address"),
    ("100:0:0:1::1", "a dummy address"),  # RFC 9780; Python calls it global
    ("5f00::1", "a segment routing (SRv6) address"),  # RFC 9602; Python calls it global
    ("::1:0:0:0", "a reserved address"),  # ::/8 outside the forms below; Python: global
    ("4000::1", "a reserved address"),
    # IPv4-mapped (::ffff:0:0/96): the OS connects to the IPv4 address itself.
    ("::ffff:127.0.0.1", "embedding 127.0.0.1, a loopback address"),
    ("::ffff:169.254.169.254", "embedding 169.254.169.254, a link-local/metadata address"),
    ("::ffff:10.0.0.1", "embedding 10.0.0.1, a private address"),
    ("::ffff:100.64.0.1", "embedding 100.64.0.1, a carrier-grade NAT (shared) address"),
    ("::ffff:8.8.8.8", "an IPv4-mapped address"),  # Python 3.11 calls it non-global
    # IPv4-translated (::ffff:0:0:0/96, RFC 6145): Python calls all of these global.
    ("::ffff:0:7f00:1", "embedding 127.0.0.1, a loopback address"),
    ("::ffff:0:a9fe:a9fe", "embedding 169.254.169.254, a link-local/metadata address"),
    ("::ffff:0:a00:1", "embedding 10.0.0.1, a private address"),
    ("::ffff:0:0:0", "embedding 0.0.0.0, an unspecified ('this network') address"),
    ("::ffff:0:808:808", "an IPv4-translated (SIIT) address"),  # refused even when global
    # IPv4-compatible (::/96, deprecated).
    ("::7f00:1", "embedding 127.0.0.1, a loopback address"),
    ("::a9fe:a9fe", "embedding 169.254.169.254, a link-local/metadata address"),
    ("::808:808", "an IPv4-compatible (deprecated) address"),
    # NAT64, well-known prefix (64:ff9b::/96) and local-use (64:ff9b:1::/48).
    ("64:ff9b::7f00:1", "embedding 127.0.0.1, a loopback address"),
    ("64:ff9b::a9fe:a9fe", "embedding 169.254.169.254, a link-local/metadata address"),
    ("64:ff9b::6440:1", "embedding 100.64.0.1, a carrier-grade NAT (shared) address"),
    ("64:ff9b:1::a00:1", "a local-use NAT64 address"),
    ("64:ff9b:1:fffe::808:808", "a local-use NAT64 address"),
    # 6to4 (2002::/16): the IPv4 address in bits 16-47.
    ("2002:7f00:1::1", "embedding 127.0.0.1, a loopback address"),
    ("2002:c0a8:101::1", "embedding 192.168.1.1, a private address"),
    ("2002:a9fe:a9fe::1", "embedding 169.254.169.254, a link-local/metadata address"),
    ("2002:c000:201::1", "embedding 192.0.2.1, a documentation address"),
    ("2002:808:808::1", "a 6to4 address"),  # Python 3.13 calls it non-global
    # Teredo (2001::/32): server in bits 32-63, client inverted in the last 32 (RFC 4380's
    # own example carries client 192.0.2.45); refused even when both are global.
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "embedding 192.0.2.45, a documentation address"),
    ("2001:0:a00:1:8000:63bf:f7f7:f7f7", "embedding 10.0.0.1, a private address"),
    ("2001:0:4136:e378:8000:63bf:80ff:fefe", "embedding 127.0.1.1, a loopback address"),
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "a Teredo tunnel address"),
    ("2001::1", "embedding 0.0.0.0, an unspecified"),
]


@pytest.mark.parametrize(("address", "reason"), REFUSED_ADDRESSES)
def test_non_global_addresses_are_refused(address: str, reason: str) -> None:
    why = check_address(ip_address(address))
    assert why is not None
    assert reason in why


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700:4700::1111",
        "64:ff9b::808:808",  # NAT64: what DNS64 answers for 8.8.8.8 on an IPv6-only network
        "2a00:1450:4001:82b::200e",
    ],
)
def test_global_addresses_pass(address: str) -> None:
    assert check_address(ip_address(address)) is None


def embedding_forms(v4: IPv4Address) -> dict[str, IPv6Address]:
    """Every IPv6 form that carries ``v4`` (Teredo twice: as server and as client)."""
    n = int(v4)
    public = int(IPv4Address("65.54.227.120"))
    return {
        "mapped": IPv6Address(0xFFFF << 32 | n),
        "translated": IPv6Address(0xFFFF << 48 | n),
        "compatible": IPv6Address(n),
        "nat64": IPv6Address(int(IPv6Address("64:ff9b::")) | n),
        "6to4": IPv6Address(0x2002 << 112 | n << 80 | 1),
        "teredo-server": IPv6Address(0x20010000 << 96 | n << 64 | ~public & 0xFFFFFFFF),
        "teredo-client": IPv6Address(0x20010000 << 96 | public << 64 | ~n & 0xFFFFFFFF),
    }


@settings(max_examples=300, database=None, deadline=None)
@given(st.ip_addresses(v=4))
def test_an_embedded_ipv4_address_is_judged_first(v4: IPv4Address) -> None:
    why = check_address(v4)
    for form, address in embedding_forms(v4).items():
        verdict = check_address(address)
        if why is not None:
            assert verdict is not None, f"{form} {address} carries {v4} ({why})"
            if int(v4) > 1 or form != "compatible":  # :: and ::1 keep their own names
                assert f"embedding {v4}, {why}" in verdict, (form, address, verdict)
        elif form == "nat64":
            assert verdict is None, f"{form} {address} carries the global {v4}: {verdict}"
        else:
            assert verdict is not None, f"{form} {address} is admitted"


@settings(max_examples=500, database=None, deadline=None)
@given(st.ip_addresses())
def test_whatever_python_calls_non_global_is_refused(address: IPv4Address | IPv6Address) -> None:
    if not address.is_global or address.is_multicast:
        assert check_address(address) is not None
    if address.is_reserved and address not in NAT64:  # NAT64 lies in ::/8, "reserved"
        assert check_address(address) is not None


NAT64 = IPv6Network("64:ff9b::/96")


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "::1"])
def test_allow_loopback_admits_loopback(address: str) -> None:
    assert check_address(ip_address(address), allow_loopback=True) is None


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "192.168.0.1",
        "169.254.169.254",
        "fd00:ec2::254",
        "::ffff:127.0.0.1",
        "64:ff9b::7f00:1",
        "0.0.0.0",
        "100.64.0.1",
    ],
)
def test_allow_loopback_admits_nothing_else(address: str) -> None:
    assert check_address(ip_address(address), allow_loopback=True) is not None


# -- URL rules (refused before any DNS lookup or connection) ---------------------------------

REFUSED_URLS = [
    ("http://127.0.0.1/", "refused: 127.0.0.1 is a loopback address"),
    ("http://[::1]/", "refused: ::1 is a loopback address"),
    ("http://10.20.30.40/", "refused: 10.20.30.40 is a private address"),
    ("http://172.16.0.5/admin", "refused: 172.16.0.5 is a private address"),
    ("http://192.168.0.1/", "refused: 192.168.0.1 is a private address"),
    (
        "http://169.254.169.254/latest/meta-data/",
        "refused: 169.254.169.254 is a link-local/metadata address",
    ),
    ("http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is a link-local/metadata"),
    ("http://[::ffff:127.0.0.1]/", "embedding 127.0.0.1, a loopback address"),
    ("http://[::ffff:a9fe:a9fe]/", "embedding 169.254.169.254, a link-local/metadata"),
    ("http://[64:ff9b::7f00:1]/", "embedding 127.0.0.1, a loopback address"),
    ("http://100.64.0.1/", "100.64.0.1 is a carrier-grade NAT (shared) address"),
    ("http://0.0.0.0/", "0.0.0.0 is an unspecified ('this network') address"),
    ("http://[fe80::1%25eth0]/", "a link-local address"),
    ("http://2130706433/", "refused: 2130706433 means 127.0.0.1, a loopback address"),
    ("http://0x7f.1/", "refused: 0x7f.1 means 127.0.0.1, a loopback address"),
    ("http://0x7f000001/", "means 127.0.0.1, a loopback address"),
    ("http://0177.0.0.1/", "is not a valid URL"),  # httpx's parser refuses dotted octal
    ("http://017700000001/", "means 127.0.0.1, a loopback address"),
    ("http://127.1/", "means 127.0.0.1, a loopback address"),
    ("http://127.0.0.1./", "127.0.0.1. means 127.0.0.1, a loopback address"),
    ("http://0xa9.0xfe.0xa9.0xfe/", "means 169.254.169.254, a link-local/metadata address"),
    ("http://2852039166/", "means 169.254.169.254, a link-local/metadata address"),
    ("http://134744072/", "134744072 is a non-canonical way to write 8.8.8.8"),
    ("http://1.2.3.4.5/", "neither a host name nor a valid IPv4 address"),
    ("http://user:secret@example.com/", "user name or password"),
    ("https://admin@example.com/", "user name or password"),
    ("http://example.com:8080/", "port 8080 is not allowed (only 80, 443)"),
    ("https://example.com:22/", "port 22 is not allowed"),
    ("ftp://example.com/file.txt", "scheme 'ftp' is not allowed (only http and https)"),
    ("file:///etc/passwd", "scheme 'file' is not allowed"),
    ("gopher://example.com/", "scheme 'gopher' is not allowed"),
    ("example.com/page", "is not allowed (only http and https)"),
    ("http:///path-only", "has no host"),
]


@pytest.mark.parametrize(("url", "message"), REFUSED_URLS)
async def test_forbidden_urls_are_refused_without_dns(url: str, message: str) -> None:
    fetcher = SafeFetcher(resolve=no_dns)
    with pytest.raises(FetchRefused) as caught:
        await fetcher.fetch(url)
    assert message in caught.value.message
    assert caught.value.hint


async def test_default_ports_are_allowed_explicitly() -> None:
    resolver = Resolver({"example.com": ["10.0.0.1"]})
    for url in ("http://example.com:80/", "https://example.com:443/"):
        with pytest.raises(FetchRefused, match=r"resolves to 10\.0\.0\.1"):
            await SafeFetcher(resolve=resolver).fetch(url)
    assert resolver.calls == [("example.com", 80), ("example.com", 443)]


# -- DNS answers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (["10.0.0.5"], "intranet.example.com resolves to 10.0.0.5, a private address"),
        (["93.184.216.34", "169.254.169.254"], "resolves to 169.254.169.254, a link-local/meta"),
        (["127.0.0.1"], "resolves to 127.0.0.1, a loopback address"),
        (["2606:4700::1", "fd00:ec2::254"], "resolves to fd00:ec2::254, a link-local/metadata"),
        (["::ffff:192.168.1.20"], "embedding 192.168.1.20, a private address"),
        (["::ffff:0:a9fe:a9fe"], "embedding 169.254.169.254, a link-local/metadata address"),
        (["93.184.216.34", "::ffff:0:5db8:d822"], "an IPv4-translated (SIIT) address"),
        (["64:ff9b::a00:5"], "embedding 10.0.0.5, a private address"),
        (["64:ff9b:1::5db8:d822"], "a local-use NAT64 address"),
        (["2002:a9fe:a9fe::1"], "embedding 169.254.169.254, a link-local/metadata address"),
        (["2001:0:4136:e378:8000:63bf:f5ff:fffa"], "embedding 10.0.0.5, a private address"),
        (["::a00:5"], "embedding 10.0.0.5, a private address"),
        (["3fff::5"], "a documentation address"),
        (["fe80::1%eth0"], "resolves to fe80::1, a link-local address"),
        (["not-an-address"], "which is not an IP address"),
    ],
)
async def test_a_private_dns_answer_is_refused(answers: list[str], message: str) -> None:
    resolver = Resolver({"intranet.example.com": answers})
    with pytest.raises(FetchRefused) as caught:
        await SafeFetcher(resolve=resolver).fetch("https://intranet.example.com/")
    assert message in caught.value.message
    assert resolver.calls == [("intranet.example.com", 443)]


async def test_allow_loopback_still_refuses_private_answers() -> None:
    resolver = Resolver({"a.test": ["10.1.1.1"], "b.test": ["169.254.169.254"]})
    fetcher = SafeFetcher(TEST_POLICY, resolve=resolver)
    with pytest.raises(FetchRefused, match="a private address"):
        await fetcher.fetch("http://a.test/")
    with pytest.raises(FetchRefused, match="link-local/metadata"):
        await fetcher.fetch("http://b.test/")


async def test_allow_loopback_opens_other_ports_only_for_loopback() -> None:
    resolver = Resolver({"public.test": ["93.184.216.34"]})
    with pytest.raises(FetchRefused, match="port 8080 is not allowed"):
        await SafeFetcher(TEST_POLICY, resolve=resolver).fetch("http://public.test:8080/")


async def test_unresolvable_host_is_a_clear_error() -> None:
    with pytest.raises(FetchError, match=r"could not resolve nowhere\.test") as caught:
        await SafeFetcher(resolve=Resolver()).fetch("http://nowhere.test/")
    assert not isinstance(caught.value, FetchRefused)


async def test_system_resolver_is_the_default_and_refuses_localhost() -> None:
    with pytest.raises(FetchRefused, match=r"localhost resolves to (127\.0\.0\.1|::1)"):
        await SafeFetcher().fetch("http://localhost/")


# -- a loopback web server ---------------------------------------------------------------------


class SiteLog:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []  # (path, Host header)

    def add(self, request: Request) -> None:
        with self.lock:
            self.requests.append((request.url.path, request.headers.get("host", "")))


def gzip_bomb(decompressed_mb: int) -> bytes:
    """A small gzip body that inflates to ``decompressed_mb`` MB of spaces."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * 1_000_000
    parts = [compressor.compress(b"<html><body>")]
    parts += [compressor.compress(block) for _ in range(decompressed_mb)]
    parts.append(compressor.flush())
    return b"".join(parts)


def make_site(log: SiteLog) -> Starlette:
    bomb = gzip_bomb(50)

    async def article(request: Request) -> Response:
        log.add(request)
        return Response(ARTICLE, media_type="text/html")

    async def hop(request: Request) -> Response:
        log.add(request)
        n = int(request.path_params["n"])
        if n == 0:
            return Response(ARTICLE, media_type="text/html")
        return RedirectResponse(f"../hop/{n - 1}", status_code=302)  # relative Location

    async def redirect(request: Request) -> Response:
        log.add(request)
        status = int(request.query_params.get("status", "302"))
        return Response(status_code=status, headers={"location": request.query_params["to"]})

    async def big(request: Request) -> Response:
        size = int(request.query_params["size"])
        return Response(b"<html><body><p>" + b"x" * size, media_type="text/html")

    async def bomb_page(request: Request) -> Response:
        return Response(bomb, media_type="text/html", headers={"content-encoding": "gzip"})

    async def encoded(request: Request) -> Response:
        kind = request.path_params["kind"]
        data = ARTICLE.encode()
        if kind == "gzip":
            body = gzip.compress(data)
        elif kind == "deflate":
            body = zlib.compress(data)
        elif kind == "raw-deflate":
            c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            body = c.compress(data) + c.flush()
            kind = "deflate"
        else:
            body = b"\x1b\x00\x00"
        return Response(body, media_type="text/html", headers={"content-encoding": kind})

    async def typed(request: Request) -> Response:
        ctype = request.query_params.get("type")
        response = Response(b"%PDF-1.7 or PNG or whatever", media_type=None)
        if ctype:
            response.headers["content-type"] = ctype
        return response

    async def status(request: Request) -> Response:
        return Response(
            "nope", status_code=int(request.path_params["code"]), media_type="text/html"
        )

    async def slow_headers(request: Request) -> Response:
        await asyncio.sleep(3)
        return Response(ARTICLE, media_type="text/html")

    async def slow_body(request: Request) -> Response:
        async def trickle() -> AsyncIterator[bytes]:
            yield b"<html><body><p>first part"
            await asyncio.sleep(3)
            yield b"never read</p>"

        return StreamingResponse(trickle(), media_type="text/html")

    async def latin1(request: Request) -> Response:
        body = "<p>Caf\u00e9 cr\u00e8me</p>".encode("latin-1")
        return Response(body, headers={"content-type": "text/html; charset=ISO-8859-1"})

    async def meta_charset(request: Request) -> Response:
        body = '<html><head><meta charset="windows-1252"></head><p>\u201cquoted\u201d</p>'
        return Response(body.encode("cp1252"), headers={"content-type": "text/html"})

    async def plain(request: Request) -> Response:
        return Response("just text\n", media_type="text/plain")

    async def long_redirect(request: Request) -> Response:
        return Response(status_code=302, headers={"location": "/article?" + "a" * 5000})

    async def charset(request: Request) -> Response:
        # The body is UTF-8 and may carry its own <meta charset> (?meta=...).
        meta = request.query_params.get("meta")
        head = f'<head><meta charset="{meta}"></head>' if meta else ""
        body = f"<html>{head}<p>Caf\u00e9 \u2013 cr\u00e8me</p></html>".encode()
        return Response(body, headers={"content-type": request.query_params["ct"]})

    return Starlette(
        routes=[
            Route("/article", article),
            Route("/hop/{n:int}", hop),
            Route("/redirect", redirect),
            Route("/big", big),
            Route("/bomb", bomb_page),
            Route("/encoded/{kind}", encoded),
            Route("/typed", typed),
            Route("/status/{code:int}", status),
            Route("/slow-headers", slow_headers),
            Route("/slow-body", slow_body),
            Route("/latin1", latin1),
            Route("/meta-charset", meta_charset),
            Route("/plain", plain),
            Route("/long-redirect", long_redirect),
            Route("/charset", charset),
        ]
    )


@pytest.fixture(scope="module")
def site_log() -> SiteLog:
    return SiteLog()


@pytest.fixture(scope="module")
def site(site_log: SiteLog) -> Iterator[LoopbackServer]:
    with LoopbackServer(make_site(site_log), name="fetch-site") as server:
        yield server


@pytest.fixture
def log(site_log: SiteLog) -> SiteLog:
    with site_log.lock:
        site_log.requests.clear()
    return site_log


def fetcher_for(site: LoopbackServer, **policy: object) -> tuple[SafeFetcher, Resolver]:
    resolver = Resolver(
        {
            "pages.example.test": ["127.0.0.1"],
            "internal.example.test": ["10.0.0.7"],
            "example.com": ["93.184.216.34"],  # refused for its port; never connected to
        }
    )
    fetcher = SafeFetcher(TEST_POLICY.model_copy(update=policy), resolve=resolver)
    return fetcher, resolver


async def test_fetch_connects_to_the_checked_address_and_keeps_the_name(
    site: LoopbackServer, log: SiteLog
) -> None:
    fetcher, resolver = fetcher_for(site)
    url = f"http://pages.example.test:{site.port}/article#section"

    result = await fetcher.fetch(url)

    # The name exists only in our resolver: reaching the server proves there was no other lookup.
    assert resolver.calls == [("pages.example.test", site.port)]
    assert log.requests == [("/article", f"pages.example.test:{site.port}")]
    assert result.text == ARTICLE
    assert result.status == 200
    assert result.content_type == "text/html"
    assert result.final_url == f"http://pages.example.test:{site.port}/article"
    assert result.address == "127.0.0.1"
    assert result.truncated is False
    assert result.redirects == ()


async def test_next_address_is_tried_when_one_refuses(site: LoopbackServer, log: SiteLog) -> None:
    resolver = Resolver({"pages.example.test": ["127.0.0.2", "127.0.0.1"]})
    fetcher = SafeFetcher(TEST_POLICY, resolve=resolver)

    result = await fetcher.fetch(f"http://pages.example.test:{site.port}/article")

    assert result.address == "127.0.0.1"


async def test_connection_refused_is_a_clear_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    fetcher = SafeFetcher(TEST_POLICY, resolve=Resolver({"down.test": ["127.0.0.1"]}))
    with pytest.raises(FetchError, match=r"could not connect to down.test \(127.0.0.1\)"):
        await fetcher.fetch(f"http://down.test:{port}/")


async def test_relative_redirects_are_followed_up_to_five(
    site: LoopbackServer, log: SiteLog
) -> None:
    fetcher, resolver = fetcher_for(site)
    base = f"http://pages.example.test:{site.port}"

    result = await fetcher.fetch(f"{base}/hop/5")

    assert result.text == ARTICLE
    assert result.final_url == f"{base}/hop/0"
    assert result.redirects == tuple(f"{base}/hop/{n}" for n in (4, 3, 2, 1, 0))
    assert len(resolver.calls) == 6, "every hop is resolved and checked again"


async def test_a_sixth_redirect_is_too_many(site: LoopbackServer, log: SiteLog) -> None:
    fetcher, _ = fetcher_for(site)

    with pytest.raises(FetchError, match="too many redirects") as caught:
        await fetcher.fetch(f"http://pages.example.test:{site.port}/hop/6")

    assert len(log.requests) == 6
    assert not isinstance(caught.value, FetchRefused)


@pytest.mark.parametrize(
    ("to", "message"),
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            "redirect 1 of 5 to http://169.254.169.254/latest/meta-data/ refused: "
            "169.254.169.254 is a link-local/metadata address",
        ),
        (
            "http://internal.example.test/",
            "redirect 1 of 5 to http://internal.example.test/ refused: "
            "internal.example.test resolves to 10.0.0.7, a private address",
        ),
        ("http://[::ffff:10.0.0.1]/", "embedding 10.0.0.1, a private address"),
        ("http://2130706433/", "2130706433 means 127.0.0.1, a loopback address"),
        ("file:///etc/passwd", "redirect 1 of 5 to file:///etc/passwd refused: scheme 'file'"),
        (
            "javascript:alert(1)",
            "redirect 1 of 5 to javascript:alert(1) refused: scheme 'javascript' is not allowed",
        ),
        ("JavaScript:alert(1)", "scheme 'javascript' is not allowed (only http and https)"),
        ("data:text/html,<p>hi</p>", "to data:text/html,<p>hi</p> refused: scheme 'data'"),
        ("ftp://example.com/file.txt", "scheme 'ftp' is not allowed"),
        ("mailto:someone@example.com", "scheme 'mailto' is not allowed"),
        ("http://[::ffff:0:7f00:1]/", "embedding 127.0.0.1, a loopback address"),
        ("http://[64:ff9b:1::a00:1]/", "a local-use NAT64 address"),
        ("http://user:pw@pages.example.test/", "user name or password"),
        ("https://example.com:8443/", "port 8443 is not allowed"),
    ],
)
async def test_redirect_to_a_forbidden_place_is_refused(
    site: LoopbackServer, log: SiteLog, to: str, message: str
) -> None:
    fetcher, _ = fetcher_for(site)
    # 127.0.0.1 is allowed here (allow_loopback) so the first hop succeeds; the target is not.
    with pytest.raises(FetchRefused) as caught:
        await fetcher.fetch(f"{site.url}/redirect?to={to}")
    assert message in caught.value.message
    assert [path for path, _ in log.requests] == ["/redirect"]


@pytest.mark.parametrize(
    ("to", "message"),
    [
        ("http://", "redirect 1 of 5 cannot be followed: the Location 'http://' has no host"),
        ("https:", "the Location 'https:' has no host"),
        ("http:///etc/passwd", "the Location 'http:///etc/passwd' has no host"),
        ("//", "the Location '//' has no host"),
        ("///x", "the Location '///x' has no host"),
        ("http:article", "the Location 'http:article' has no host"),
        ("http://[::1", "the Location 'http://[::1' is not a valid URL (Invalid port"),
        ("http://[v1.x]/", "is not a valid URL"),
        ("http://xn--/", "redirect 1 of 5 to http://xn--/ failed: 'xn--' is not a valid host"),
        ("http://a..b/", "'a..b' is not a valid host name (an empty label)"),
        (f"http://{'a' * 64}.test/", "a label longer than 63 characters"),
        ("http://bad_host!.test/", "is not a valid host name"),
        ("http://nowhere.test/", "redirect 1 of 5 to http://nowhere.test/ failed: could not res"),
    ],
)
async def test_a_location_that_cannot_be_followed_is_a_clear_error(
    site: LoopbackServer, log: SiteLog, to: str, message: str
) -> None:
    fetcher, _ = fetcher_for(site)
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(f"{site.url}/redirect?to={quote(to, safe='')}")
    assert message in caught.value.message
    assert caught.value.hint
    assert not isinstance(caught.value, FetchRefused)
    assert caught.value.__cause__ is None, "classified, not caught by the last-resort handler"
    assert [path for path, _ in log.requests] == ["/redirect"]


async def test_an_over_long_location_is_a_clear_error(site: LoopbackServer, log: SiteLog) -> None:
    fetcher, _ = fetcher_for(site)
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(f"{site.url}/long-redirect")
    assert "redirect 1 of 5 cannot be followed: the Location '/article?aaa" in caught.value.message
    assert "(5009 characters)' is longer than 4096 characters" in caught.value.message
    assert len(caught.value.message) < 400


async def test_refused_redirect_later_in_the_chain_names_its_number(
    site: LoopbackServer, log: SiteLog
) -> None:
    fetcher, _ = fetcher_for(site)
    inner = "/redirect?to=http://169.254.169.254/"
    with pytest.raises(FetchRefused, match=r"^redirect 2 of 5 to http://169\.254\.169\.254/"):
        await fetcher.fetch(f"{site.url}/redirect?to={inner.replace('?', '%3F')}")


@pytest.mark.parametrize("status", [301, 303, 307, 308])
async def test_every_redirect_status_is_checked(
    site: LoopbackServer, log: SiteLog, status: int
) -> None:
    fetcher, _ = fetcher_for(site)
    with pytest.raises(FetchRefused, match="link-local/metadata"):
        await fetcher.fetch(f"{site.url}/redirect?status={status}&to=http://169.254.169.254/")


async def test_oversize_body_is_cut_at_the_cap_and_flagged(site: LoopbackServer) -> None:
    fetcher, _ = fetcher_for(site, max_bytes=100_000)

    result = await fetcher.fetch(f"{site.url}/big?size=3000000")

    assert result.truncated is True
    assert len(result.text) == 100_000


async def test_body_at_the_cap_is_not_flagged(site: LoopbackServer) -> None:
    fetcher, _ = fetcher_for(site, max_bytes=1_000)
    result = await fetcher.fetch(f"{site.url}/big?size={1_000 - len('<html><body><p>')}")
    assert (result.truncated, len(result.text)) == (False, 1_000)


async def test_gzip_bomb_stops_at_the_decompressed_cap(site: LoopbackServer) -> None:
    fetcher, _ = fetcher_for(site)  # default cap: 2 MB of the 50 MB it would inflate to

    result = await fetcher.fetch(f"{site.url}/bomb")

    assert result.truncated is True
    assert len(result.text) == 2_000_000
    assert result.text.startswith("<html><body>")


@pytest.mark.parametrize("kind", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_pages_are_decoded(site: LoopbackServer, kind: str) -> None:
    fetcher, _ = fetcher_for(site)
    result = await fetcher.fetch(f"{site.url}/encoded/{kind}")
    assert result.text == ARTICLE


async def test_unrequested_encoding_is_refused(site: LoopbackServer) -> None:
    fetcher, _ = fetcher_for(site)
    with pytest.raises(FetchError, match="unsupported Content-Encoding 'br'"):
        await fetcher.fetch(f"{site.url}/encoded/br")


@pytest.mark.parametrize(
    ("ctype", "shown"),
    [
        ("application/pdf", "application/pdf"),
        ("image/png", "image/png"),
        ("application/json", "application/json"),
        ("application/octet-stream", "application/octet-stream"),
        (None, "no content type"),
    ],
)
async def test_wrong_content_type_is_refused(
    site: LoopbackServer, ctype: str | None, shown: str
) -> None:
    fetcher, _ = fetcher_for(site)
    query = f"?type={ctype}" if ctype else ""
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(f"{site.url}/typed{query}")
    assert f"is {shown}, not a text page" in caught.value.message
    assert "text/html" in caught.value.message
    assert caught.value.hint


async def test_text_plain_and_charsets(site: LoopbackServer) -> None:
    fetcher, _ = fetcher_for(site)

    plain = await fetcher.fetch(f"{site.url}/plain")
    latin = await fetcher.fetch(f"{site.url}/latin1")
    meta = await fetcher.fetch(f"{site.url}/meta-charset")

    assert (plain.content_type, plain.text) == ("text/plain", "just text\n")
    assert (latin.charset, latin.text) == ("ISO-8859-1", "<p>Caf\u00e9 cr\u00e8me</p>")
    assert meta.charset == "windows-1252"
    assert "\u201cquoted\u201d" in meta.text


@pytest.mark.parametrize(
    ("ctype", "charset"),
    [
        # Not a charset at all, or a Python codec that is not a web text encoding: UTF-8.
        ("text/html; charset=x-unknown-123", "utf-8"),
        ("text/html; charset=rot13", "utf-8"),
        ("text/html; charset=base64", "utf-8"),
        ("text/html; charset=hex", "utf-8"),
        ("text/html; charset=undefined", "utf-8"),  # a codec whose every decode fails
        ("text/html; charset=idna", "utf-8"),  # refuses errors="replace"
        ("text/html; charset=punycode", "utf-8"),
        ("text/html; charset=unicode_escape", "utf-8"),
        ('text/html; charset=""', "utf-8"),
        ("text/plain; charset=x-unknown-123", "utf-8"),
        ("text/html; charset=UTF-8", "UTF-8"),
        ("text/html; charset=unicode-1-1-utf-8", "unicode-1-1-utf-8"),  # a WHATWG label
    ],
)
async def test_an_unknown_charset_falls_back_to_utf8(
    site: LoopbackServer, ctype: str, charset: str
) -> None:
    fetcher, _ = fetcher_for(site)
    result = await fetcher.fetch(f"{site.url}/charset?ct={quote(ctype)}")
    assert result.charset == charset
    assert "Caf\u00e9 \u2013 cr\u00e8me" in result.text


async def test_an_unknown_header_charset_gives_way_to_the_meta_charset(
    site: LoopbackServer,
) -> None:
    fetcher, _ = fetcher_for(site)
    ctype = quote("text/html; charset=x-unknown-123")

    by_meta = await fetcher.fetch(f"{site.url}/charset?ct={ctype}&meta=windows-1252")
    unknown_meta = await fetcher.fetch(f"{site.url}/charset?ct={ctype}&meta=x-nope")
    utf16_meta = await fetcher.fetch(f"{site.url}/charset?ct=text/html&meta=utf-16")

    assert by_meta.charset == "windows-1252"  # the page's own (wrong) label is believed
    assert "Caf\u00c3\u00a9" in by_meta.text
    assert unknown_meta.charset == "utf-8"
    assert "Caf\u00e9" in unknown_meta.text
    assert utf16_meta.charset == "utf-16"  # a readable <meta> means it is not UTF-16
    assert "Caf\u00e9 \u2013 cr\u00e8me" in utf16_meta.text


@pytest.mark.parametrize(
    ("code", "hint"), [(404, "does not exist"), (403, "login"), (503, "later")]
)
async def test_http_errors_are_reported_with_a_hint(
    site: LoopbackServer, code: int, hint: str
) -> None:
    fetcher, _ = fetcher_for(site)
    with pytest.raises(FetchError, match=f"HTTP {code} ") as caught:
        await fetcher.fetch(f"{site.url}/status/{code}")
    assert hint in (caught.value.hint or "")


@pytest.mark.parametrize("path", ["/slow-headers", "/slow-body"])
async def test_total_timeout(site: LoopbackServer, path: str) -> None:
    fetcher, _ = fetcher_for(site, total_timeout_s=0.3)
    with pytest.raises(FetchError, match=r"timed out after 0.3 s fetching"):
        await fetcher.fetch(f"{site.url}{path}")


# -- TLS: the certificate is checked against the name, over the pinned address ----------------

crypto = pytest.importorskip("cryptography")


def self_signed(hostname: str, directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for ``hostname`` (and its key), made for this test run."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class TLSServer:
    """A one-route HTTPS server in the test's own event loop that records SNI and Host."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.context.sni_callback = self._sni
        self.server_names: list[str | None] = []
        self.hosts: list[str] = []
        self.server: asyncio.Server | None = None

    def _sni(self, sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        self.server_names.append(name)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()
            return
        for line in head.decode().split("\r\n"):
            if line.lower().startswith("host:"):
                self.hosts.append(line.split(":", 1)[1].strip())
        body = b"<html><body><p>secret-free TLS page</p></body></html>"
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    async def __aenter__(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.context)
        return int(self.server.sockets[0].getsockname()[1])

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed("example.test", tmp_path)


def trusting(cert: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cert))
    assert context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    return context


async def test_tls_verifies_the_hostname_over_the_pinned_address(
    tls_files: tuple[Path, Path],
) -> None:
    cert, key = tls_files
    server = TLSServer(cert, key)
    resolver = Resolver({"example.test": ["127.0.0.1"]})
    fetcher = SafeFetcher(TEST_POLICY, resolve=resolver, ssl_context=trusting(cert))

    async with server as port:
        result = await fetcher.fetch(f"https://example.test:{port}/")

    assert "secret-free TLS page" in result.text
    assert result.address == "127.0.0.1"
    assert server.server_names == ["example.test"], "SNI carries the name, not the address"
    assert server.hosts == [f"example.test:{port}"]


async def test_tls_certificate_for_another_name_is_rejected(
    tls_files: tuple[Path, Path],
) -> None:
    cert, key = tls_files
    server = TLSServer(cert, key)
    # Same address, different name: the certificate (for example.test) must not satisfy it.
    resolver = Resolver({"other.test": ["127.0.0.1"]})
    fetcher = SafeFetcher(TEST_POLICY, resolve=resolver, ssl_context=trusting(cert))

    async with server as port:
        with pytest.raises(FetchError, match=r"TLS with other\.test failed") as caught:
            await fetcher.fetch(f"https://other.test:{port}/")

    assert "Hostname mismatch" in caught.value.message
    assert server.server_names == ["other.test"]
    assert server.hosts == [], "no request is sent over an unverified connection"


async def test_tls_untrusted_certificate_is_rejected(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    server = TLSServer(cert, key)
    fetcher = SafeFetcher(TEST_POLICY, resolve=Resolver({"example.test": ["127.0.0.1"]}))

    async with server as port:  # the default CA bundle does not trust our certificate
        with pytest.raises(FetchError, match=r"TLS with example\.test failed"):
            await fetcher.fetch(f"https://example.test:{port}/")
    assert server.hosts == []


@pytest.mark.parametrize("port", ["65536", "99999999"])
async def test_a_port_that_is_not_a_port_is_the_fetcher_s_error(port: str) -> None:
    """Found by the fuzz test: connect() overflowed on a redirect to port 35291000."""
    fetcher = SafeFetcher(FetchPolicy(allow_loopback=True))
    with pytest.raises(FetchError, match="is not a port"):
        await fetcher.fetch(f"http://127.0.0.1:{port}/")
