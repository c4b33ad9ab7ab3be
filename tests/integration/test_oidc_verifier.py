"""JwtVerifier against a real loopback issuer (discovery + JWKS over HTTP), real PyJWT.

Each refusal is checked for what it is (an AuthError with the invalid_token challenge whose
message never holds the token) and each outage for being a JwksUnavailable, never a pass.
The verifier's clock (which paces refetches) is a VerifierClock the tests move; token times are
real, relative to now.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from agentloop.auth import INVALID_TOKEN_CHALLENGE, AuthError
from agentloop.config import ConfigurationError
from agentloop.oidc import JwksUnavailable, JwtSettings, JwtVerifier
from agentloop.oidc.jwks import REFETCH_INTERVAL_S, RETRY_UNAVAILABLE_S
from agentloop.oidc.verifier import MAX_TOKEN_CHARS
from agentloop.principal import Principal
from tests.jwks_server import (
    DISCOVERY_PATH,
    JWKS_PATH,
    IssuerServer,
    SigningKey,
    VerifierClock,
    b64url,
    closed_port_url,
    ec_key,
    forge,
    mint,
    rsa_key,
)

AUDIENCE = ("client-a", "client-b")


def verifier_for(issuer_url: str, clock: VerifierClock, **settings: Any) -> JwtVerifier:
    jwt_settings = JwtSettings(issuer=issuer_url, audience=AUDIENCE, **settings)
    return JwtVerifier(jwt_settings, clock=clock)


@pytest.fixture
def verifier(issuer: IssuerServer, clock: VerifierClock) -> JwtVerifier:
    return verifier_for(issuer.url, clock)


def claims(issuer: IssuerServer, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"iss": issuer.url, "aud": "client-a", "sub": "user-1", "iat": now, "exp": now + 300}
    base.update(changes)
    return {name: value for name, value in base.items() if value is not None}


def refused(verifier: JwtVerifier, token: str, reason: str) -> None:
    """The token is a 401 saying ``reason``, with the invalid_token challenge, not echoing it."""
    with pytest.raises(AuthError) as caught:
        verifier.verify(token)
    assert reason in caught.value.message
    assert caught.value.headers == {"WWW-Authenticate": INVALID_TOKEN_CHALLENGE}
    assert token not in caught.value.message
    assert token not in str(caught.value)


# --- accepted ---------------------------------------------------------------------------


@pytest.mark.parametrize("key_name", ["rsa", "ecdsa"])
def test_accepts_rs256_and_es256(
    verifier: JwtVerifier, issuer: IssuerServer, request: pytest.FixtureRequest, key_name: str
) -> None:
    key: SigningKey = request.getfixturevalue(key_name)
    token = mint(claims(issuer, email="ada@example.com"), key)
    principal = verifier.verify(token)
    assert principal == Principal.for_jwt(issuer.url, "user-1", "ada@example.com", None)
    assert principal.kind == "jwt"
    assert principal.issuer == issuer.url
    assert principal.subject == "user-1"
    assert issuer.requests == [DISCOVERY_PATH, JWKS_PATH]


def test_keys_are_fetched_once_and_reused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, ecdsa: SigningKey
) -> None:
    for key in (rsa, ecdsa, rsa):
        verifier.verify(mint(claims(issuer), key))
    assert issuer.requests == [DISCOVERY_PATH, JWKS_PATH]


def test_configured_jwks_url_skips_discovery(
    issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey
) -> None:
    verifier = verifier_for(issuer.url, clock, jwks_url=issuer.url + JWKS_PATH)
    assert verifier.verify(mint(claims(issuer), rsa)).subject == "user-1"
    assert issuer.requests == [JWKS_PATH]


def test_name_is_the_first_name_claim_else_sub(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey
) -> None:
    named = claims(issuer, username="ada", preferred_username="ada-l")
    assert verifier.verify(mint(named, rsa)).name == "ada"
    assert verifier.verify(mint(claims(issuer, preferred_username="ada-l"), rsa)).name == "ada-l"
    assert verifier.verify(mint(claims(issuer), rsa)).name == "user-1"
    # A name that could forge a log line is passed over.
    assert verifier.verify(mint(claims(issuer, email="a@x\nINFO forged"), rsa)).name == "user-1"


# --- times ------------------------------------------------------------------------------


def test_expired_is_refused(verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey) -> None:
    now = int(time.time())
    refused(verifier, mint(claims(issuer, iat=now - 600, exp=now - 60), rsa), "expired")


def test_not_yet_valid_is_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey
) -> None:
    now = int(time.time())
    refused(verifier, mint(claims(issuer, nbf=now + 120), rsa), "not yet valid")
    refused(verifier, mint(claims(issuer, iat=now + 120), rsa), "not yet valid")


def test_within_leeway_is_accepted(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey
) -> None:
    now = int(time.time())
    late = claims(issuer, iat=now - 600, exp=now - 10)
    early = claims(issuer, nbf=now + 10, iat=now + 10)
    assert verifier.verify(mint(late, rsa)).subject == "user-1"
    assert verifier.verify(mint(early, rsa)).subject == "user-1"


@pytest.mark.parametrize(
    "changes",
    [
        {"exp": "soon"},
        {"exp": float("inf")},
        {"exp": [1]},
        {"nbf": float("nan")},
        {"iat": "yesterday"},
        {"iss": "a list"},
    ],
    ids=repr,
)
def test_hostile_claim_values_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, changes: dict[str, Any]
) -> None:
    """Signed by the issuer but nonsense: still a 401, never a crash."""
    if "iss" in changes:
        changes = {"iss": [issuer.url]}
    header = {"alg": "RS256", "typ": "JWT", "kid": rsa.kid}
    assert verifier.verify(forge(header, claims(issuer), signer=rsa)).subject == "user-1"
    refused(verifier, forge(header, claims(issuer, **changes), signer=rsa), "invalid token")


def test_exp_is_required(verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey) -> None:
    refused(verifier, mint(claims(issuer, exp=None), rsa), "no exp claim")


# --- issuer, audience, token_use ----------------------------------------------------------


@pytest.mark.parametrize(
    "iss", ["https://evil.example", "{url}/", "{url}/other", "{URL}", None], ids=repr
)
def test_wrong_issuer_is_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, iss: str | None
) -> None:
    value = iss.format(url=issuer.url, URL=issuer.url.upper()) if iss else None
    refused(verifier, mint(claims(issuer, iss=value), rsa), "invalid token")


@pytest.mark.parametrize("aud", ["client-b", ["other", "client-a"]], ids=repr)
def test_audience_string_or_list_accepted(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, aud: object
) -> None:
    assert verifier.verify(mint(claims(issuer, aud=aud), rsa)).subject == "user-1"


@pytest.mark.parametrize("aud", ["other", ["other", "x"], [], None, 7, [7]], ids=repr)
def test_wrong_or_missing_audience_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, aud: object
) -> None:
    refused(verifier, mint(claims(issuer, aud=aud), rsa), "audience")


def test_cognito_access_token_client_id(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey
) -> None:
    access = claims(issuer, aud=None, token_use="access", client_id="client-b")
    assert verifier.verify(mint(access, rsa)).subject == "user-1"
    refused(verifier, mint({**access, "client_id": "client-z"}, rsa), "audience")
    # client_id counts only for an access token, and only when there is no aud.
    refused(verifier, mint({**access, "token_use": "id"}, rsa), "audience")
    refused(verifier, mint({**access, "aud": "other"}, rsa), "audience")


@pytest.mark.parametrize("token_use", ["refresh", "", 1, ["access"]], ids=repr)
def test_bad_token_use_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, token_use: object
) -> None:
    refused(verifier, mint(claims(issuer, token_use=token_use), rsa), "token_use")


@pytest.mark.parametrize("sub", [None, "", "x" * 256, "a\nb", 42, ["user-1"]], ids=repr)
def test_bad_sub_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, sub: object
) -> None:
    refused(verifier, mint(claims(issuer, sub=sub), rsa), "invalid token")


# --- algorithms and headers -------------------------------------------------------------


@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
def test_alg_none_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, alg: str
) -> None:
    token = forge({"alg": alg, "typ": "JWT", "kid": rsa.kid}, claims(issuer))
    refused(verifier, token, "algorithm is not accepted")


def test_hs256_keyed_with_the_public_key_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey
) -> None:
    header = {"alg": "HS256", "typ": "JWT", "kid": rsa.kid}
    refused(verifier, forge(header, claims(issuer), rsa.public_pem()), "algorithm")
    # Also when the header claims RS256 but the signature is the HMAC.
    header["alg"] = "RS256"
    refused(verifier, forge(header, claims(issuer), rsa.public_pem()), "bad signature")


def test_algorithm_not_configured_refused(
    issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey, ecdsa: SigningKey
) -> None:
    verifier = verifier_for(issuer.url, clock, algorithms=("RS256",))
    assert verifier.verify(mint(claims(issuer), rsa)).subject == "user-1"
    refused(verifier, mint(claims(issuer), ecdsa), "algorithm is not accepted")


def test_algorithm_must_match_the_keys(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, ecdsa: SigningKey
) -> None:
    """An ES256 token whose kid names the RSA key: the key decides, not the header."""
    refused(verifier, mint(claims(issuer), ecdsa, headers={"kid": rsa.kid}), "does not match")


def test_kid_required(verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey) -> None:
    refused(verifier, mint(claims(issuer), rsa, headers={"kid": None}), "kid")
    refused(verifier, mint(claims(issuer), rsa, headers={"kid": ""}), "kid")
    refused(verifier, mint(claims(issuer), rsa, headers={"kid": "k" * 300}), "kid")


def test_critical_header_extensions_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey
) -> None:
    unknown = mint(claims(issuer), rsa, headers={"crit": ["exp-ext"], "exp-ext": 1})
    refused(verifier, unknown, "invalid token")
    # b64 is an extension PyJWT knows; this server still uses none.
    header = {"alg": "RS256", "kid": rsa.kid, "crit": ["b64"], "b64": True}
    refused(verifier, forge(header, claims(issuer), signer=rsa), "critical")


def test_tampered_payload_refused(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, ecdsa: SigningKey
) -> None:
    for key in (rsa, ecdsa):
        header, _, signature = mint(claims(issuer), key).split(".")
        forged = b64url(
            f'{{"iss":"{issuer.url}","aud":"client-a","sub":"admin","exp":9e9}}'.encode()
        )
        refused(verifier, f"{header}.{forged}.{signature}", "bad signature")


@pytest.mark.parametrize("field", ["jku", "x5u"])
def test_key_urls_in_the_header_are_never_fetched(
    verifier: JwtVerifier, issuer: IssuerServer, stranger: SigningKey, field: str
) -> None:
    with IssuerServer([stranger]) as attacker:
        token = mint(claims(issuer), stranger, headers={field: attacker.url + JWKS_PATH})
        refused(verifier, token, "does not publish")
        assert attacker.requests == []


def test_embedded_keys_in_the_header_are_never_used(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, stranger: SigningKey
) -> None:
    """The attacker signs with their own key, names the issuer's kid and embeds their key."""
    embedded = {**stranger.public_jwk(), "kid": rsa.kid}
    token = mint(claims(issuer), stranger, headers={"kid": rsa.kid, "jwk": embedded})
    refused(verifier, token, "bad signature")
    x5c = mint(claims(issuer), stranger, headers={"kid": rsa.kid, "x5c": ["MIIBIjAN"]})
    refused(verifier, x5c, "bad signature")


# --- malformed input --------------------------------------------------------------------


def test_token_too_long_refused_before_parsing(verifier: JwtVerifier, issuer: IssuerServer) -> None:
    refused(verifier, "a." + "b" * MAX_TOKEN_CHARS + ".c", "longer than")
    assert issuer.requests == []


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not-a-jwt",
        "a.b",
        "a.b.c",
        "...",
        "a.b.c.d.e",  # a JWE's five parts
        "é.ü.ß",
        "eyJ.eyJ.sig",
        b64url(b"[1]") + ".e30.",
        b64url(b"[" * 5000 + b"]" * 5000) + ".e30.",
        b64url(b'{"alg":"RS256","kid":7}') + ".e30.",
        b64url(b'{"alg":["RS256"],"kid":"rsa-1"}') + ".e30.",
    ],
)
def test_non_jwt_strings_refused(verifier: JwtVerifier, token: str) -> None:
    with pytest.raises(AuthError) as caught:
        verifier.verify(token)
    assert caught.value.headers == {"WWW-Authenticate": INVALID_TOKEN_CHALLENGE}


def test_non_string_refused(verifier: JwtVerifier) -> None:
    with pytest.raises(AuthError):
        verifier.verify(b"a.b.c")  # type: ignore[arg-type]


# --- key set: rotation, refetch pacing, outages ------------------------------------------


def test_unknown_kid_refetches_once_a_minute(
    verifier: JwtVerifier, issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey
) -> None:
    verifier.verify(mint(claims(issuer), rsa))
    refused(verifier, mint(claims(issuer), rsa, headers={"kid": "unknown-1"}), "does not publish")
    assert issuer.count(JWKS_PATH) == 1  # within a minute of the first fetch: none
    clock.advance(REFETCH_INTERVAL_S)
    refused(verifier, mint(claims(issuer), rsa, headers={"kid": "unknown-2"}), "does not publish")
    assert issuer.count(JWKS_PATH) == 2  # exactly one refetch
    clock.advance(REFETCH_INTERVAL_S - 1)
    refused(verifier, mint(claims(issuer), rsa, headers={"kid": "unknown-3"}), "does not publish")
    assert issuer.count(JWKS_PATH) == 2
    assert issuer.count(DISCOVERY_PATH) == 1  # the jwks_uri is remembered


def test_rotation_accepts_the_new_key_after_a_refetch(
    verifier: JwtVerifier, issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey
) -> None:
    verifier.verify(mint(claims(issuer), rsa))
    rotated = rsa_key("rsa-2")
    issuer.keys = [rotated]
    clock.advance(REFETCH_INTERVAL_S)
    assert verifier.verify(mint(claims(issuer), rotated)).subject == "user-1"
    assert issuer.count(JWKS_PATH) == 2
    refused(verifier, mint(claims(issuer), rsa), "does not publish")  # withdrawn


def test_a_stale_set_is_refreshed_and_a_withdrawn_key_stops_working(
    verifier: JwtVerifier, issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey
) -> None:
    token = mint(claims(issuer), rsa)
    verifier.verify(token)
    issuer.keys = [rsa_key("rsa-3")]
    clock.advance(3599)
    assert verifier.verify(token).subject == "user-1"  # still fresh: no fetch
    assert issuer.count(JWKS_PATH) == 1
    clock.advance(2)
    refused(verifier, token, "does not publish")
    assert issuer.count(JWKS_PATH) == 2


def test_refetch_failure_keeps_the_cached_set(
    verifier: JwtVerifier, issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey
) -> None:
    verifier.verify(mint(claims(issuer), rsa))
    issuer.mode = "garbage"
    clock.advance(REFETCH_INTERVAL_S)
    refused(verifier, mint(claims(issuer), rsa, headers={"kid": "new"}), "does not publish")
    assert issuer.count(JWKS_PATH) == 2
    assert verifier.verify(mint(claims(issuer), rsa)).subject == "user-1"


@pytest.mark.parametrize("path", [DISCOVERY_PATH, JWKS_PATH])
@pytest.mark.parametrize("mode", ["garbage", "oversized", "nested", "error", "slow"])
def test_unusable_key_set_is_unavailable(
    issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey, mode: Any, path: str
) -> None:
    """The discovery document or (configured directly) the key set misbehaves."""
    jwks_url = issuer.url + JWKS_PATH if path == JWKS_PATH else None
    verifier = verifier_for(issuer.url, clock, jwks_url=jwks_url, jwks_timeout_s=0.3)
    issuer.mode = mode
    started = time.monotonic()
    with pytest.raises(JwksUnavailable) as caught:
        verifier.verify(mint(claims(issuer), rsa))
    assert time.monotonic() - started < 2.0
    assert isinstance(caught.value, ConfigurationError)
    assert issuer.requests == [path]


@pytest.mark.parametrize("where", ["discovery", "jwks"])
def test_issuer_down_is_unavailable(clock: VerifierClock, rsa: SigningKey, where: str) -> None:
    down = closed_port_url()
    if where == "discovery":
        verifier = verifier_for(down, clock)
    else:
        verifier = verifier_for("https://issuer.example", clock, jwks_url=down + JWKS_PATH)
    with pytest.raises(JwksUnavailable, match="could not be fetched"):
        verifier.verify(mint(claims_for("https://issuer.example"), rsa))


def claims_for(issuer_url: str) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": issuer_url, "aud": "client-a", "sub": "u", "iat": now, "exp": now + 300}


@pytest.mark.parametrize(
    "jwks",
    [
        [],
        [{"kty": "oct", "kid": "rsa-1", "k": "c2VjcmV0"}],
        [{"kid": "x", "kty": "RSA", "n": "AQAB", "e": "AQAB"}],
        ["string", 3, None, {"kid": 5}],
    ],
    ids=["empty", "symmetric", "broken-rsa", "junk"],
)
def test_key_set_without_usable_keys_is_unavailable(
    clock: VerifierClock, rsa: SigningKey, jwks: list[Any]
) -> None:
    with IssuerServer() as issuer:
        issuer.extra_jwks = jwks
        with pytest.raises(JwksUnavailable, match="no usable"):
            verifier_for(issuer.url, clock).verify(mint(claims(issuer), rsa))


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_unusable_keys_are_skipped(clock: VerifierClock, rsa: SigningKey) -> None:
    """Weak RSA, other curves, encryption keys, private parts: never verification keys."""
    weak, p384 = rsa_key("weak", bits=1024), ec_key("p384", ec.SECP384R1())
    encryption = {**rsa_key("enc").public_jwk(), "use": "enc"}
    private = rsa_key("private")
    private_jwk = {**private.public_jwk(), "d": "AQAB"}
    with IssuerServer([rsa, weak]) as issuer:
        issuer.extra_jwks = [p384.public_jwk(), encryption, private_jwk]
        verifier = verifier_for(issuer.url, clock)
        assert verifier.verify(mint(claims(issuer), rsa)).subject == "user-1"
        refused(verifier, mint(claims(issuer), weak), "does not publish")
        refused(verifier, mint(claims(issuer), p384, alg="ES384"), "algorithm")
        enc_token = mint(claims(issuer), rsa, headers={"kid": "enc"})
        refused(verifier, enc_token, "does not publish")
        refused(verifier, mint(claims(issuer), private), "does not publish")


def test_discovery_naming_a_plain_http_jwks_is_unavailable(
    issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey
) -> None:
    with IssuerServer([rsa]) as elsewhere:
        issuer.jwks_uri = elsewhere.url.replace("127.0.0.1", "10.0.0.1") + JWKS_PATH
        with pytest.raises(JwksUnavailable, match="https"):
            verifier_for(issuer.url, clock).verify(mint(claims(issuer), rsa))
        assert elsewhere.requests == []


def test_unavailable_issuer_is_retried_after_a_pause(
    verifier: JwtVerifier, issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey
) -> None:
    token = mint(claims(issuer), rsa)
    issuer.mode = "error"
    for _ in range(3):
        with pytest.raises(JwksUnavailable):
            verifier.verify(token)
    assert issuer.requests == [DISCOVERY_PATH]  # one attempt, not one per request
    issuer.mode = "ok"
    clock.advance(RETRY_UNAVAILABLE_S)
    assert verifier.verify(token).subject == "user-1"


def test_concurrent_first_verifications_fetch_once(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey
) -> None:
    token = mint(claims(issuer), rsa)
    start = threading.Barrier(8)
    results: list[Principal | BaseException] = []

    def verify() -> None:
        start.wait()
        try:
            results.append(verifier.verify(token))
        except BaseException as exc:  # collected so the assertion shows it
            results.append(exc)

    threads = [threading.Thread(target=verify) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(isinstance(result, Principal) for result in results), results
    assert issuer.requests == [DISCOVERY_PATH, JWKS_PATH]


# --- tier and ids -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tier"),
    [
        (["pro", "admin"], "pro"),
        ("pro", "pro"),
        ([], None),
        ([3, "pro"], None),
        (None, None),
        ("x" * 200, None),
    ],
)
def test_tier_claim(
    issuer: IssuerServer, clock: VerifierClock, rsa: SigningKey, value: object, tier: str | None
) -> None:
    verifier = verifier_for(issuer.url, clock, tier_claim="cognito:groups")
    token = mint(claims(issuer, **{"cognito:groups": value}), rsa)
    assert verifier.verify(token).tier == tier


def test_tier_is_none_when_not_configured(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey
) -> None:
    assert verifier.verify(mint(claims(issuer, **{"cognito:groups": ["pro"]}), rsa)).tier is None


def test_principal_ids_are_stable_short_and_distinct(
    verifier: JwtVerifier, issuer: IssuerServer, rsa: SigningKey, ecdsa: SigningKey
) -> None:
    first = verifier.verify(mint(claims(issuer), rsa))
    again = verifier.verify(mint(claims(issuer, email="new@example.com"), ecdsa))
    other = verifier.verify(mint(claims(issuer, sub="user-2"), rsa))
    assert first.id == again.id
    assert first.id != other.id
    assert first.id.startswith("jwt:")
    assert len(first.id) == len("jwt:") + 24
    assert "user-1" not in first.id
    assert issuer.url not in first.id
    with IssuerServer([rsa]) as second_issuer:
        elsewhere = verifier_for(second_issuer.url, VerifierClock())
        same_sub = elsewhere.verify(mint(claims(second_issuer), rsa))
    assert same_sub.subject == first.subject
    assert same_sub.id != first.id
