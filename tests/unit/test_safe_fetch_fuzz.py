"""Property: whatever a server answers, the fetcher returns a page or raises its own error.

A raw loopback server (a plain socket, so nothing on the server side tidies the bytes up)
answers with a redirect whose ``Location`` and a page whose ``Content-Type``, charset,
encoding and body hypothesis chooses, including bytes no HTTP library would send. The only
exceptions allowed out are :class:`FetchError` raised on purpose: one caught by the
fetcher's last-resort handler (which chains the original exception) fails the test too.
"""

from __future__ import annotations

import asyncio
import re
import socket
import socketserver
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentloop.net.safe_fetch import FetchError, FetchPolicy, FetchResult, SafeFetcher

PAGE = "<html><head><title>T</title></head><body><p>Caf\u00e9</p></body></html>"


@dataclass
class Answers:
    """What the server says: to ``/start`` (``first``), and to any other path (``page``)."""

    first: bytes = b""
    page: bytes = b""


class _Handler(socketserver.BaseRequestHandler):
    server: RawSite

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(5)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 65_536:
                chunk = sock.recv(4096)
                if not chunk:
                    return
                head += chunk
            target = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
            answers = self.server.answers
            sock.sendall(answers.first if target.startswith(b"/start") else answers.page)
        except OSError:
            return


class RawSite(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = Answers()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@pytest.fixture(scope="module")
def raw_site() -> Iterator[RawSite]:
    server = RawSite()
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="raw-site", daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


async def table_resolver(host: str, port: int) -> Sequence[str]:
    """``pages.example.test`` is the loopback server; a few names are private; others fail."""
    table = {
        "pages.example.test": ["127.0.0.1"],
        "internal.example.test": ["10.0.0.7"],
        "mapped.example.test": ["::ffff:0:a9fe:a9fe"],
    }
    if host not in table:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return table[host]


NASTY_LOCATIONS = [
    "javascript:alert(1)",
    "JAVASCRIPT:alert(document.cookie)",
    "data:text/html;base64,PHA+aGk8L3A+",
    "file:///etc/passwd",
    "ftp://example.com/x",
    "gopher://x/",
    "http://",
    "https:",
    "http:",
    "//",
    "///etc/passwd",
    "http:///etc/passwd",
    "http:page",
    "http:\\\\evil.test\\",
    "/\\evil.test",
    "http://[::1",
    "http://[v1.x]/",
    "http://[::ffff:0:7f00:1]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://internal.example.test/",
    "http://mapped.example.test/",
    "http://user:pw@pages.example.test:{port}/",
    "http://pages.example.test:{port}/page",
    "http://pages.example.test:{port}/start",  # loops until too many redirects
    "http://pages.example.test:22/",
    "http://xn--/",
    "http://xn--a/",
    "http://a..b/",
    "http://" + "a" * 64 + ".test/",
    "http://%00/",
    "http://\u00e9xample.test/",
    "http://\u0000/",
    "/page?" + "a" * 5000,
    "page#frag",
    "?q=1",
    "",
    " ",
    "\t/page",
]
URL_CHARS = st.characters(codec="utf-8") | st.sampled_from(
    list(":/?#[]@!$&'()*+,;=%.-_~\\ \t\x00\x7f")
)
SCHEMES = ["http://", "https://", "HTTP://", "//", "http:", "javascript:", "data:", "", "ftp://"]
HOSTS = [
    "pages.example.test:{port}",
    "127.0.0.1:{port}",
    "[::1]:{port}",
    "169.254.169.254",
    "[::ffff:0:7f00:1]",
    "[64:ff9b::a00:1]",
    "[2002:a9fe:a9fe::1]",
    "2130706433",
    "xn--",
    "a..b",
    "user@pages.example.test",
    "",
    "[",
    "%00",
    "\u00e9xample.test",
    "internal.example.test",
]

locations = st.one_of(
    st.sampled_from(NASTY_LOCATIONS).map(str.encode),
    st.binary(max_size=80),  # anything, framing breakers (\r\n, NUL) included
    st.text(URL_CHARS, max_size=60).map(str.encode),
    st.builds(
        lambda scheme, host, path: f"{scheme}{host}{path}".encode(),
        st.sampled_from(SCHEMES),
        st.sampled_from(HOSTS) | st.text(URL_CHARS, max_size=20),
        st.text(URL_CHARS, max_size=20),
    ),
)
CHARSETS = [
    "utf-8",
    "x-unknown-123",
    "rot13",
    "base64",
    "hex",
    "zlib",
    "undefined",
    "idna",
    "punycode",
    "unicode_escape",
    "utf-7",
    "utf-16",
    "utf-32",
    "mbcs",
    "iso-2022-jp",
    "shift_jis",
    '"utf-8',
    "",
    "utf-8\x00",
]
charsets = st.one_of(
    st.sampled_from(CHARSETS).map(str.encode),
    st.text(max_size=16).map(str.encode),
    st.binary(max_size=12),
)
MEDIA_TYPES = [
    b"text/html",
    b"text/plain",
    b"application/xhtml+xml",
    b"TEXT/HTML",
    b"application/pdf",
    b"",
]
content_types = st.builds(
    lambda media, charset: media if charset is None else media + b"; charset=" + charset,
    st.sampled_from(MEDIA_TYPES) | st.binary(max_size=16),
    st.none() | charsets,
)
bodies = st.one_of(
    st.binary(max_size=200),
    st.builds(
        lambda label: f'<html><head><meta charset="{label}"></head><p>\u00e9</p>'.encode(),
        st.sampled_from(CHARSETS) | st.text(max_size=12),
    ),
    st.just(PAGE.encode()),
)
encodings = st.sampled_from([None, b"gzip", b"deflate", b"br", b"gzip, gzip", b"identity"])


def redirect(status: int, location: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status} Moved\r\n".encode()
        + b"Location: "
        + location
        + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )


def page(content_type: bytes, body: bytes, encoding: bytes | None) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\n"
    if encoding is not None:
        head += b"Content-Encoding: " + encoding + b"\r\n"
    return head + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body


def fetch_from(site: RawSite, answers: Answers) -> FetchResult | FetchError:
    site.answers = answers
    policy = FetchPolicy(allow_loopback=True, total_timeout_s=3.0, connect_timeout_s=1.0)
    fetcher = SafeFetcher(policy, resolve=table_resolver)
    try:
        return asyncio.run(fetcher.fetch(f"http://pages.example.test:{site.port}/start"))
    except FetchError as exc:
        return exc


def assert_own_error_or_page(outcome: FetchResult | FetchError) -> None:
    if isinstance(outcome, FetchError):
        assert outcome.__cause__ is None, (
            f"the last-resort handler caught {outcome.__cause__!r}: {outcome.message}"
        )
        assert outcome.message
        assert len(outcome.message) < 1_000, "messages quote long values shortened"
    else:
        assert isinstance(outcome.text, str)


FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,  # leave no .hypothesis folder in the tree
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(
    status=st.sampled_from([301, 302, 303, 307, 308]),
    location=locations,
    content_type=content_types,
    body=bodies,
    encoding=encodings,
)
@example(301, b"javascript:alert(1)", b"text/html", b"", None)
@example(302, b"http:///x", b"text/html; charset=x-unknown-123", PAGE.encode(), None)
@example(302, b"/page", b"text/html; charset=rot13", PAGE.encode(), None)
@example(302, b"/page", b"text/html; charset=idna", PAGE.encode(), None)
@example(302, b"http://xn--/", b"text/html", b"", None)
@example(302, b"/page\x00", b"text/html", b"", None)
def test_redirects_and_pages_give_a_page_or_a_fetch_error(
    raw_site: RawSite,
    status: int,
    location: bytes,
    content_type: bytes,
    body: bytes,
    encoding: bytes | None,
) -> None:
    location = location.replace(b"{port}", str(raw_site.port).encode())
    answers = Answers(redirect(status, location), page(content_type, body, encoding))
    assert_own_error_or_page(fetch_from(raw_site, answers))


@FUZZ
@given(content_type=content_types, body=bodies, encoding=encodings)
@example(b"text/html; charset=x-unknown-123", PAGE.encode(), None)
@example(b"text/html; charset=base64", PAGE.encode(), None)
@example(b"text/html; charset=undefined", PAGE.encode(), None)
def test_pages_give_text_or_a_fetch_error(
    raw_site: RawSite, content_type: bytes, body: bytes, encoding: bytes | None
) -> None:
    served = page(content_type, body, encoding)
    outcome = fetch_from(raw_site, Answers(first=served, page=served))
    assert_own_error_or_page(outcome)
    declared = content_type.split(b";")[0].strip().lower()
    legal = not re.search(rb"[\x00-\x08\x0a-\x1f\x7f]", content_type)  # else malformed HTTP
    if declared == b"text/html" and encoding is None and body == PAGE.encode() and legal:
        # A text page is read whatever its charset claims: decoded or, failing that, UTF-8.
        assert isinstance(outcome, FetchResult), outcome
        assert "<title>T</title>" in outcome.text
