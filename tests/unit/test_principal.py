"""Principal: each kind's id and name, and a JWT id that is short, stable and non-secret."""

from __future__ import annotations

import dataclasses

import pytest

from agentloop.principal import Principal

ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbCdEfGhI"


def test_local() -> None:
    assert Principal.local() == Principal(kind="local", id="local", name="local")


def test_key_and_iam() -> None:
    key = Principal.for_key("ci-bot")
    assert (key.kind, key.id, key.name, key.tier) == ("key", "key:ci-bot", "ci-bot", None)
    arn = "arn:aws:iam::123456789012:role/caller"
    iam = Principal.for_iam(arn, tier="pro")
    assert (iam.kind, iam.id, iam.name, iam.tier) == ("iam", f"iam:{arn}", arn, "pro")


def test_jwt_id_is_a_short_digest_of_issuer_and_subject() -> None:
    one = Principal.for_jwt(ISSUER, "sub-1", "ada@example.com", "pro")
    assert one.id == Principal.for_jwt(ISSUER, "sub-1", "other name", None).id
    assert one.id.startswith("jwt:")
    assert len(one.id) == 4 + 24
    assert int(one.id[4:], 16) >= 0  # hex
    assert "sub-1" not in one.id
    assert "cognito" not in one.id
    assert one.id != Principal.for_jwt(ISSUER, "sub-2", "ada@example.com", "pro").id
    assert one.id != Principal.for_jwt(ISSUER + "x", "sub-1", "ada@example.com", "pro").id
    assert (one.name, one.tier, one.issuer, one.subject) == (
        "ada@example.com",
        "pro",
        ISSUER,
        "sub-1",
    )


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Principal.local().id = "someone"  # type: ignore[misc]
