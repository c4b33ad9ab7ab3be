"""The project secret in (moto's) Secrets Manager: reads, Powertools' cache, keys and tokens."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from agentloop.auth import AuthError, BearerAuth, hash_token, new_token, token_hashes_from_secret
from agentloop.config import ConfigurationError
from agentloop.secret_store import PROVIDER_KEY_NAMES, load_provider_keys, read_secret

boto3 = pytest.importorskip("boto3")
moto = pytest.importorskip("moto")
parameters = pytest.importorskip("aws_lambda_powertools.utilities.parameters")

SECRET_ID = "agentloop/test"


@pytest.fixture(autouse=True)
def aws(mocked_aws: None) -> None:
    """Every test here talks to moto."""


@pytest.fixture
def sm() -> Any:
    return boto3.client("secretsmanager", region_name="us-east-1")


def create(sm: Any, value: dict[str, Any] | str, name: str = SECRET_ID) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    sm.create_secret(Name=name, SecretString=text)


def update(sm: Any, value: dict[str, Any], name: str = SECRET_ID) -> None:
    sm.put_secret_value(SecretId=name, SecretString=json.dumps(value))


# --- read_secret -------------------------------------------------------------------------------


def test_read_secret_returns_the_object(sm: Any) -> None:
    create(sm, {"GROQ_API_KEY": "gsk_x", "auth_token_sha256": ["ab" * 32]})
    assert read_secret(SECRET_ID) == {"GROQ_API_KEY": "gsk_x", "auth_token_sha256": ["ab" * 32]}


def test_reads_within_max_age_are_served_from_the_cache(sm: Any) -> None:
    create(sm, {"v": 1})
    assert read_secret(SECRET_ID, max_age_s=300) == {"v": 1}
    update(sm, {"v": 2})
    assert read_secret(SECRET_ID, max_age_s=300) == {"v": 1}  # no Secrets Manager call
    parameters.clear_caches()  # what expiry does in a warm container
    assert read_secret(SECRET_ID, max_age_s=300) == {"v": 2}


def test_cached_entry_expires_after_max_age(sm: Any) -> None:
    create(sm, {"v": 1})
    assert read_secret(SECRET_ID, max_age_s=1) == {"v": 1}
    update(sm, {"v": 2})
    assert read_secret(SECRET_ID, max_age_s=1) == {"v": 1}
    time.sleep(1.1)
    assert read_secret(SECRET_ID, max_age_s=1) == {"v": 2}


def test_max_age_zero_reads_every_time(sm: Any) -> None:
    create(sm, {"v": 1})
    assert read_secret(SECRET_ID, max_age_s=0) == {"v": 1}
    update(sm, {"v": 2})
    assert read_secret(SECRET_ID, max_age_s=0) == {"v": 2}


def test_max_age_is_fixed_when_the_value_is_cached(sm: Any) -> None:
    """Powertools' rule, pinned: a later read with a smaller max_age does not shorten an entry."""
    create(sm, {"v": 1})
    assert read_secret(SECRET_ID, max_age_s=300) == {"v": 1}
    update(sm, {"v": 2})
    assert read_secret(SECRET_ID, max_age_s=0) == {"v": 1}


def test_callers_cannot_corrupt_the_cached_value(sm: Any) -> None:
    create(sm, {"auth_token_sha256": ["ab" * 32]})
    first = read_secret(SECRET_ID)
    first["auth_token_sha256"].append("cd" * 32)
    first["extra"] = True
    assert read_secret(SECRET_ID) == {"auth_token_sha256": ["ab" * 32]}


def test_missing_secret_names_the_id() -> None:
    with pytest.raises(ConfigurationError) as info:
        read_secret("agentloop/missing")
    message = str(info.value)
    assert "'agentloop/missing'" in message
    assert "not found" in message
    assert "AGENTLOOP_SECRET_ID" in message


def test_missing_secret_is_not_cached(sm: Any) -> None:
    with pytest.raises(ConfigurationError):
        read_secret(SECRET_ID)
    create(sm, {"v": 1})
    assert read_secret(SECRET_ID) == {"v": 1}


def test_non_json_secret_is_a_configuration_error_without_the_value(sm: Any) -> None:
    create(sm, "hunter2-plain-text")
    with pytest.raises(ConfigurationError) as info:
        read_secret(SECRET_ID)
    message = str(info.value)
    assert SECRET_ID in message
    assert "not valid JSON" in message
    assert "hunter2" not in message
    assert info.value.__cause__ is None


@pytest.mark.parametrize(("text", "kind"), [('["a"]', "array"), ('"s"', "string"), ("3", "number")])
def test_json_that_is_not_an_object_is_a_configuration_error(sm: Any, text: str, kind: str) -> None:
    create(sm, text)
    with pytest.raises(ConfigurationError, match=f"must hold a JSON object, not a JSON {kind}"):
        read_secret(SECRET_ID)


def test_empty_secret_id_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="AGENTLOOP_SECRET_ID"):
        read_secret(" ")


# --- load_provider_keys ------------------------------------------------------------------------


def test_load_provider_keys_sets_only_unset_non_empty_keys(sm: Any) -> None:
    create(
        sm,
        {
            "GROQ_API_KEY": " gsk_from_secret\n",
            "OPENAI_API_KEY": "sk_from_secret",
            "TAVILY_API_KEY": "",
            "BRAVE_API_KEY": 123,
            "UNRELATED_KEY": "not copied",
        },
    )
    environ = {"OPENAI_API_KEY": "sk_already_set"}
    loaded = load_provider_keys(read_secret(SECRET_ID), environ)
    assert loaded == ["GROQ_API_KEY"]
    assert environ == {"OPENAI_API_KEY": "sk_already_set", "GROQ_API_KEY": "gsk_from_secret"}
    assert load_provider_keys(read_secret(SECRET_ID), environ) == []  # idempotent


def test_load_provider_keys_fills_empty_variables() -> None:
    environ = {"GROQ_API_KEY": ""}
    assert load_provider_keys({"GROQ_API_KEY": "gsk_x"}, environ) == ["GROQ_API_KEY"]
    assert environ["GROQ_API_KEY"] == "gsk_x"


def test_load_provider_keys_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    # Empty counts as unset; setenv (unlike delenv of an absent name) restores them afterwards.
    for name in PROVIDER_KEY_NAMES:
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly_local")
    secret = {name: f"{name.lower()}_value" for name in PROVIDER_KEY_NAMES}
    assert load_provider_keys(secret) == [
        "GROQ_API_KEY",
        "OPENAI_API_KEY",
        "BRAVE_API_KEY",
        "AGENTLOOP_SIGNING_KEY",  # paused runs' tokens: one key for every instance
    ]
    assert os.environ["GROQ_API_KEY"] == "groq_api_key_value"
    assert os.environ["TAVILY_API_KEY"] == "tvly_local"


# --- BearerAuth over the secret ----------------------------------------------------------------


def test_bearer_auth_from_the_secret_accepts_the_right_token(sm: Any) -> None:
    token, digest = new_token()
    create(sm, {"auth_token_sha256": [hash_token("al_old"), digest.upper()]})
    auth = BearerAuth(token_hashes_from_secret(SECRET_ID))
    assert auth.check(f"Bearer {token}") == digest[:8]
    with pytest.raises(AuthError, match=r"^invalid token$"):
        auth.check("Bearer al_wrong")
    with pytest.raises(AuthError, match="missing bearer token"):
        auth.check(None)


def test_rotated_token_takes_effect_when_the_cache_expires(sm: Any) -> None:
    old, old_hash = new_token()
    new, new_hash = new_token()
    create(sm, {"auth_token_sha256": [old_hash]})
    auth = BearerAuth(token_hashes_from_secret(SECRET_ID, max_age_s=300))
    assert auth.check(f"Bearer {old}") == old_hash[:8]

    update(sm, {"auth_token_sha256": [new_hash]})
    assert auth.check(f"Bearer {old}") == old_hash[:8]  # cached: the old token still works
    with pytest.raises(AuthError, match="invalid token"):
        auth.check(f"Bearer {new}")

    parameters.clear_caches()  # the cache entry expiring
    assert auth.check(f"Bearer {new}") == new_hash[:8]
    with pytest.raises(AuthError, match="invalid token"):
        auth.check(f"Bearer {old}")


def test_rotation_with_max_age_zero_is_immediate(sm: Any) -> None:
    old, old_hash = new_token()
    new, new_hash = new_token()
    create(sm, {"auth_token_sha256": [old_hash]})
    auth = BearerAuth(token_hashes_from_secret(SECRET_ID, max_age_s=0))
    assert auth.check(f"Bearer {old}") == old_hash[:8]
    update(sm, {"auth_token_sha256": [new_hash]})
    assert auth.check(f"Bearer {new}") == new_hash[:8]
    with pytest.raises(AuthError, match="invalid token"):
        auth.check(f"Bearer {old}")


def test_secret_without_token_hashes_answers_401_not_a_crash(sm: Any) -> None:
    create(sm, {"GROQ_API_KEY": "gsk_x"})
    auth = BearerAuth(token_hashes_from_secret(SECRET_ID))
    with pytest.raises(AuthError, match="no bearer tokens are configured") as info:
        auth.check("Bearer al_anything")
    assert info.value.status == 401


def test_token_hashes_of_the_wrong_type_are_a_configuration_error(sm: Any) -> None:
    create(sm, {"auth_token_sha256": {"a": "b"}})
    with pytest.raises(ConfigurationError, match="'auth_token_sha256' in secret 'agentloop/test'"):
        BearerAuth(token_hashes_from_secret(SECRET_ID)).check("Bearer al_anything")


def test_missing_secret_at_check_time_is_a_configuration_error() -> None:
    auth = BearerAuth(token_hashes_from_secret("agentloop/missing"))
    with pytest.raises(ConfigurationError, match="'agentloop/missing' was not found"):
        auth.check("Bearer al_anything")
