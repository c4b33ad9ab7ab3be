"""Bearer-token auth: header parsing, constant-time matching, loaders, and the auth mode."""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agentloop.auth import (
    AuthError,
    BearerAuth,
    auth_mode_from_env,
    bearer_auth_from_env,
    hash_token,
    new_token,
    token_hashes_from_env,
)
from agentloop.config import ConfigurationError

TOKEN = "al_right-token"
TOKEN_HASH = hashlib.sha256(TOKEN.encode()).hexdigest()
OTHER_HASHES = [hashlib.sha256(f"other-{i}".encode()).hexdigest() for i in range(4)]


class CountingList(list[str]):
    """A stored-hash list that counts how many entries the checker iterates over."""

    yielded = 0

    def __iter__(self) -> Iterator[str]:
        for item in super().__iter__():
            self.yielded += 1
            yield item


def auth_with(*hashes: str) -> BearerAuth:
    stored = list(hashes)
    return BearerAuth(lambda: stored)


def auth_error(auth: BearerAuth, header: str | None) -> AuthError:
    with pytest.raises(AuthError) as info:
        auth.check(header)
    assert info.value.status == 401
    assert info.value.message == str(info.value)
    return info.value


# --- hashing and new tokens --------------------------------------------------------------------


def test_hash_token_is_sha256_hex() -> None:
    assert hash_token("abc") == ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


def test_new_token_has_prefix_and_matching_hash() -> None:
    token, digest = new_token()
    assert token.startswith("al_")
    assert len(token) == 3 + 43  # token_urlsafe(32): 43 URL-safe characters
    assert all(ch.isalnum() or ch in "-_" for ch in token)
    assert digest == hashlib.sha256(token.encode()).hexdigest()
    assert new_token()[0] != token


# --- check() -----------------------------------------------------------------------------------


def test_right_token_returns_short_id_of_its_hash() -> None:
    assert auth_with(*OTHER_HASHES, TOKEN_HASH).check(f"Bearer {TOKEN}") == TOKEN_HASH[:8]


@pytest.mark.parametrize(
    "header",
    [f"bearer {TOKEN}", f"BEARER {TOKEN}", f"  Bearer    {TOKEN}  ", f"Bearer\t{TOKEN}"],
)
def test_scheme_is_case_insensitive_and_spaces_are_stripped(header: str) -> None:
    assert auth_with(TOKEN_HASH).check(header) == TOKEN_HASH[:8]


@pytest.mark.parametrize("header", [None, "", "   "])
def test_missing_header(header: str | None) -> None:
    error = auth_error(auth_with(TOKEN_HASH), header)
    assert error.message == "missing bearer token: send 'Authorization: Bearer <token>'"
    assert error.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", [f"Basic {TOKEN}", TOKEN, f"Token {TOKEN}"])
def test_wrong_scheme_is_malformed_and_not_echoed(header: str) -> None:
    error = auth_error(auth_with(TOKEN_HASH), header)
    assert error.message.startswith("malformed Authorization header")
    assert TOKEN not in error.message


@pytest.mark.parametrize("header", ["Bearer", "Bearer   ", "bearer\t"])
def test_empty_token(header: str) -> None:
    error = auth_error(auth_with(TOKEN_HASH), header)
    assert error.message == "malformed Authorization header: the bearer token is empty"


def test_token_with_inner_space_is_malformed() -> None:
    error = auth_error(auth_with(TOKEN_HASH), "Bearer al_some secret")
    assert "contains spaces" in error.message
    assert "al_some" not in error.message


@pytest.mark.parametrize("presented", ["al_wrong-token", TOKEN.upper(), TOKEN + "x", TOKEN_HASH])
def test_wrong_token_is_invalid_and_not_echoed(presented: str) -> None:
    error = auth_error(auth_with(*OTHER_HASHES, TOKEN_HASH), f"Bearer {presented}")
    assert error.message == "invalid token"
    assert presented not in repr(error)


def test_no_message_ever_contains_the_presented_token() -> None:
    secret = "al_Sup3rSecretValue"
    headers = [
        secret,
        f"Basic {secret}",
        f"Bearer {secret}",
        f"Bearer {secret} extra",
        f"{secret} {secret}",
    ]
    for auth in (auth_with(TOKEN_HASH), auth_with()):
        for header in headers:
            error = auth_error(auth, header)
            assert secret not in error.message
            assert secret not in repr(error.args)


def test_stored_hashes_are_stripped_and_lowercased() -> None:
    auth = auth_with(f"  {TOKEN_HASH.upper()}\n")
    assert auth.check(f"Bearer {TOKEN}") == TOKEN_HASH[:8]


def test_malformed_stored_hashes_are_ignored_with_a_count_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = ["", "not-a-hash", TOKEN_HASH[:63], TOKEN_HASH + "0", "g" * 64, TOKEN]
    auth = auth_with(*bad, TOKEN_HASH)
    with caplog.at_level(logging.WARNING, logger="agentloop.auth"):
        assert auth.check(f"Bearer {TOKEN}") == TOKEN_HASH[:8]
        auth_error(auth, "Bearer al_wrong")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["ignoring 6 stored token hash(es) that are not 64 hex characters"]
    # The count is logged once per change, not on every request, and never any entry.
    assert TOKEN not in caplog.text
    assert "not-a-hash" not in caplog.text


def test_non_string_stored_entries_are_ignored() -> None:
    auth = BearerAuth(lambda: [None, 42, TOKEN_HASH])  # type: ignore[list-item]
    assert auth.check(f"Bearer {TOKEN}") == TOKEN_HASH[:8]


@pytest.mark.parametrize("position", [0, 2, 4])
def test_every_stored_hash_is_examined_wherever_the_match_is(position: int) -> None:
    stored = CountingList(OTHER_HASHES)
    stored.insert(position, TOKEN_HASH)
    auth = BearerAuth(lambda: stored)

    assert auth.check(f"Bearer {TOKEN}") == TOKEN_HASH[:8]
    assert stored.yielded == len(stored) == 5

    stored.yielded = 0
    auth_error(auth, "Bearer al_wrong")
    assert stored.yielded == 5


def test_hashes_are_loaded_on_every_check() -> None:
    stored: list[str] = []
    auth = BearerAuth(lambda: stored)
    assert "no bearer tokens are configured" in auth_error(auth, f"Bearer {TOKEN}").message
    stored.append(TOKEN_HASH)
    assert auth.check(f"Bearer {TOKEN}") == TOKEN_HASH[:8]
    stored[:] = OTHER_HASHES
    assert auth_error(auth, f"Bearer {TOKEN}").message == "invalid token"


def test_only_malformed_hashes_means_no_tokens_configured() -> None:
    error = auth_error(auth_with("nope", "x" * 64), f"Bearer {TOKEN}")
    assert error.message.startswith("no bearer tokens are configured on the server")


def test_loader_errors_propagate_as_they_are() -> None:
    def broken() -> list[str]:
        raise ConfigurationError("secret 'x' was not found")

    with pytest.raises(ConfigurationError, match="not found"):
        BearerAuth(broken).check(f"Bearer {TOKEN}")


# --- loaders and modes -------------------------------------------------------------------------


def test_env_loader_reads_comma_separated_hashes_at_each_call() -> None:
    environ = {"AGENTLOOP_AUTH_TOKEN_SHA256": f" {OTHER_HASHES[0]} ,{TOKEN_HASH},, "}
    load = token_hashes_from_env(environ)
    assert [h.strip() for h in load()] == [OTHER_HASHES[0], TOKEN_HASH]
    assert BearerAuth(load).check(f"Bearer {TOKEN}") == TOKEN_HASH[:8]
    environ["AGENTLOOP_AUTH_TOKEN_SHA256"] = OTHER_HASHES[1]
    assert [h.strip() for h in load()] == [OTHER_HASHES[1]]
    del environ["AGENTLOOP_AUTH_TOKEN_SHA256"]
    assert load() == []


def test_bearer_auth_from_env_uses_the_env_hashes_locally() -> None:
    auth = bearer_auth_from_env({"AGENTLOOP_AUTH_TOKEN_SHA256": TOKEN_HASH})
    assert auth.check(f"Bearer {TOKEN}") == TOKEN_HASH[:8]


@pytest.mark.parametrize(
    "environ", [{}, {"AGENTLOOP_SECRET_ID": " ", "AGENTLOOP_AUTH_TOKEN_SHA256": ""}]
)
def test_bearer_auth_from_env_without_a_source_is_a_configuration_error(
    environ: dict[str, str],
) -> None:
    with pytest.raises(ConfigurationError) as info:
        bearer_auth_from_env(environ)
    message = str(info.value)
    assert message.startswith(
        "bearer auth needs AGENTLOOP_SECRET_ID or AGENTLOOP_AUTH_TOKEN_SHA256"
    )
    assert "AGENTLOOP_AUTH_MODE" in message


def test_bearer_auth_from_env_prefers_the_secret_without_reading_it_yet() -> None:
    # Construction is lazy: no AWS call (or boto3 import) until the first check.
    auth = bearer_auth_from_env(
        {"AGENTLOOP_SECRET_ID": "agentloop/test", "AGENTLOOP_AUTH_TOKEN_SHA256": TOKEN_HASH}
    )
    assert isinstance(auth, BearerAuth)


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (None, "bearer"),
        ("", "bearer"),
        ("bearer", "bearer"),
        ("IAM", "iam"),
        (" none ", "none"),
    ],
)
def test_auth_mode_from_env(value: str | None, mode: str) -> None:
    environ = {} if value is None else {"AGENTLOOP_AUTH_MODE": value}
    assert auth_mode_from_env(environ) == mode


@pytest.mark.parametrize("value", ["anonymous", "off", "AWS_IAM"])
def test_invalid_auth_mode_lists_the_valid_ones(value: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        auth_mode_from_env({"AGENTLOOP_AUTH_MODE": value})
    assert "AGENTLOOP_AUTH_MODE must be one of bearer, jwt, iam, none" in str(info.value)


def test_importing_auth_loads_neither_boto3_nor_powertools() -> None:
    code = (
        "import sys, agentloop.auth, agentloop.secret_store; "
        "heavy = [m for m in ('boto3', 'botocore', 'aws_lambda_powertools', 'pydantic') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
