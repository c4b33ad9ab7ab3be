"""A JWKS document parsed into ready key objects, one per ``kid``.

Keys are parsed once, when the set is fetched, so a verification does no key parsing. Only
what can verify an accepted algorithm is kept: RSA (at least 2048 bits) for RS256, EC on
P-256 for ES256, with ``use`` "sig" or none, and an ``alg``, when the key names one, that
matches. Anything else in the set (encryption keys, other curves, private parts, junk) is
skipped; a set with no usable key at all is a failure, not an empty success.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from agentloop.oidc.fetch import FetchFailed

MAX_KEYS = 100
MAX_KID_CHARS = 256
_MIN_RSA_BITS = 2048
_PRIVATE_PARTS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


@dataclass(frozen=True, slots=True)
class LoadedKey:
    """A verification key and the one algorithm it may be used with."""

    alg: str
    key: Any  # a cryptography RSAPublicKey or EllipticCurvePublicKey


def parse_jwks(body: bytes, algorithms: Collection[str]) -> dict[str, LoadedKey]:
    """``{kid: key}`` from a JWKS document; FetchFailed when it holds no usable key."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise FetchFailed("the key set is not JSON") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise FetchFailed("the key set has no 'keys' list")
    loaded: dict[str, LoadedKey] = {}
    for entry in entries[:MAX_KEYS]:
        kid = entry.get("kid") if isinstance(entry, dict) else None
        if not isinstance(kid, str) or not 0 < len(kid) <= MAX_KID_CHARS or kid in loaded:
            continue
        key = load_key(entry, algorithms)
        if key is not None:
            loaded[kid] = key
    if not loaded:
        raise FetchFailed("the key set has no usable RSA or EC P-256 signing key")
    return loaded


def load_key(jwk: dict[str, Any], algorithms: Collection[str]) -> LoadedKey | None:
    """One JWK as a public key object, or None when it is not one we verify with."""
    alg = _algorithm_for(jwk)
    if alg is None or alg not in algorithms or jwk.get("alg", alg) != alg:
        return None
    if jwk.get("use", "sig") != "sig" or _PRIVATE_PARTS.intersection(jwk):
        return None
    import jwt

    try:
        key = jwt.PyJWK(jwk, algorithm=alg).key
    except (jwt.PyJWTError, ValueError, TypeError, KeyError):
        return None
    if alg == "RS256" and key.key_size < _MIN_RSA_BITS:
        return None
    return LoadedKey(alg=alg, key=key)


def _algorithm_for(jwk: dict[str, Any]) -> str | None:
    """The accepted algorithm a key's type (and curve) allows, if any."""
    if jwk.get("kty") == "RSA":
        return "RS256"
    if jwk.get("kty") == "EC" and jwk.get("crv") == "P-256":
        return "ES256"
    return None
