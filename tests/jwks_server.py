"""A loopback OpenID Connect issuer for tests: discovery document, JWKS, and token minting.

``IssuerServer`` serves ``/.well-known/openid-configuration`` and ``/jwks.json`` from a
threaded ``http.server`` on 127.0.0.1, records the path of every request it receives (so a
test can show a URL was never fetched), and can be switched to misbehave: ``slow`` (holds the
answer until the server stops), ``garbage``, ``oversized``, ``nested`` (a JSON nesting bomb),
``error`` (HTTP 500). Keys are made in the test process (RSA 2048, EC P-256); ``mint`` signs
tokens with them, ``forge`` builds the ones no honest library would (``alg: none``, HS256
keyed with a public key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

Mode = Literal["ok", "slow", "garbage", "oversized", "nested", "error"]
JWKS_PATH = "/jwks.json"
DISCOVERY_PATH = "/.well-known/openid-configuration"


@dataclass(frozen=True)
class SigningKey:
    """A private key the test signs with, and the public JWK the issuer publishes for it."""

    kid: str
    alg: str
    private: Any

    def public_jwk(self) -> dict[str, Any]:
        from jwt.algorithms import ECAlgorithm, RSAAlgorithm

        algorithm = RSAAlgorithm if self.alg == "RS256" else ECAlgorithm
        jwk: dict[str, Any] = algorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "use": "sig", "alg": self.alg}

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def rsa_key(kid: str, bits: int = 2048) -> SigningKey:
    return SigningKey(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=bits))


def ec_key(kid: str, curve: ec.EllipticCurve | None = None) -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(curve or ec.SECP256R1()))


def mint(
    claims: dict[str, Any],
    key: SigningKey,
    alg: str | None = None,
    headers: dict[str, Any] | None = None,
) -> str:
    """A token signed by ``key``; ``headers`` add to (or, with None values, drop from) the
    header, which carries the key's ``kid`` unless told otherwise."""
    import jwt

    header = {"kid": key.kid, **(headers or {})}
    header = {name: value for name, value in header.items() if value is not None}
    return jwt.encode(claims, key.private, algorithm=alg or key.alg, headers=header)


def forge(
    header: dict[str, Any],
    claims: dict[str, Any],
    hmac_key: bytes | None = None,
    signer: SigningKey | None = None,
) -> str:
    """A token built by hand, with the header exactly as given: signed with HMAC-SHA256
    under ``hmac_key``, or by ``signer`` (its algorithm), or unsigned."""
    from jwt.algorithms import get_default_algorithms

    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = b""
    if hmac_key is not None:
        signature = hmac.new(hmac_key, signing_input.encode(), hashlib.sha256).digest()
    elif signer is not None:
        algorithm = get_default_algorithms()[signer.alg]
        signature = algorithm.sign(signing_input.encode(), signer.private)
    return f"{signing_input}.{b64url(signature)}"


class VerifierClock:
    """The verifier's clock (which paces key refetches), moved by the test; token times stay
    real."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def closed_port_url() -> str:
    """An http URL on loopback where nothing listens (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class IssuerServer:
    """The issuer's two documents on a loopback port; see the module docstring."""

    def __init__(self, keys: list[SigningKey] | None = None) -> None:
        self.keys: list[SigningKey] = list(keys or [])
        self.extra_jwks: list[Any] = []  # raw entries published after the keys' JWKs
        self.mode: Mode = "ok"
        self.jwks_uri: str | None = None  # what discovery names; None: this server's JWKS
        self._requests: list[str] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll so stop() (which waits for the serving loop to notice) is quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[str]:
        with self._lock:
            return list(self._requests)

    def count(self, path: str) -> int:
        return self.requests.count(path)

    def record(self, path: str) -> None:
        with self._lock:
            self._requests.append(path)

    def body(self, path: str) -> tuple[int, bytes]:
        """What ``path`` answers in the current mode (the slow mode first waits for stop)."""
        if self.mode == "slow":
            self._release.wait(timeout=30)
        if self.mode == "error":
            return 500, b'{"error": "down"}'
        if self.mode == "garbage":
            return 200, b"<html>not json at all"
        if self.mode == "oversized":
            return 200, json.dumps({"keys": [], "padding": "x" * 300_000}).encode()
        if self.mode == "nested":
            return 200, b"[" * 100_000 + b"]" * 100_000
        if path == DISCOVERY_PATH:
            document = {"issuer": self.url, "jwks_uri": self.jwks_uri or self.url + JWKS_PATH}
            return 200, json.dumps(document).encode()
        if path == JWKS_PATH:
            jwks = [key.public_jwk() for key in self.keys] + self.extra_jwks
            return 200, json.dumps({"keys": jwks}).encode()
        return 404, b"{}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _handler_for(issuer: IssuerServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer.record(self.path)
            status, body = issuer.body(self.path)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the client gave up (the slow mode's point)
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
