"""``python -m agentloop limits show|set|clear`` on a SQLite store: overrides written where
the quota reads them, usage shown as an admission left it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentloop.cli import main
from agentloop.principal import Principal
from agentloop.quota import Quota, Want, quota_from_env

DEFAULTS = {"default": {"usd_per_day": 1, "concurrent_runs": 2, "tokens_per_day": 1000}}
ALICE = Principal(kind="key", id="key:alice", name="alice")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "AGENTLOOP_STORE": f"sqlite:///{tmp_path / 'store.db'}",
        "AGENTLOOP_LIMITS": json.dumps(DEFAULTS),
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def show(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["limits", "show", "key:alice", "--json", *extra]) == 0
    shown: dict[str, Any] = json.loads(capsys.readouterr().out)
    return shown


def limits_of(shown: dict[str, Any]) -> dict[str, Any]:
    return {name: value["limit"] for name, value in shown["limits"].items()}


def quota(env: dict[str, str]) -> Quota:
    made = quota_from_env(env)
    assert made is not None
    return made


def test_set_merges_overrides_that_the_quota_then_applies(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert limits_of(show(capsys)) == {
        "usd_per_day": 1,
        "concurrent_runs": 2,
        "tokens_per_day": 1000,
    }
    assert (
        main(["limits", "set", "key:alice", "--usd-per-day", "5", "--concurrent-runs", "none"]) == 0
    )
    assert main(["limits", "set", "key:alice", "--tokens-per-day", "50"]) == 0
    shown = show(capsys)
    assert shown["overrides"] == {"usd_per_day": 5, "concurrent_runs": None, "tokens_per_day": 50}
    assert limits_of(shown) == {"usd_per_day": 5, "tokens_per_day": 50}
    usage = asyncio.run(quota(env).usage(ALICE))
    assert {name: u.limit for name, u in usage.items()} == limits_of(shown), "the server's view"


def test_show_counts_what_an_admission_holds(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    held = asyncio.run(quota(env).admit(ALICE, Want(tokens=100, micro=2000, lease_s=60)))
    assert held is not None
    shown = show(capsys)["limits"]
    assert shown["usd_per_day"]["used"] == pytest.approx(0.002)
    assert shown["tokens_per_day"]["remaining"] == 900
    assert shown["concurrent_runs"] == {"limit": 2, "used": 1, "remaining": 1, "reset_at": None}
    capsys.readouterr()
    assert main(["limits", "show", "key:alice"]) == 0
    text = capsys.readouterr().out
    assert "key:alice (tier: none)" in text
    assert "100 used of 1000, 900 left" in text


def test_a_tier_and_clear(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tiers = {**DEFAULTS, "tiers": {"pro": {"usd_per_day": 10}}}
    monkeypatch.setenv("AGENTLOOP_LIMITS", json.dumps(tiers))
    assert limits_of(show(capsys, "--tier", "pro"))["usd_per_day"] == 10
    assert main(["limits", "set", "key:alice", "--usd-per-day", "3"]) == 0
    assert limits_of(show(capsys, "--tier", "pro"))["usd_per_day"] == 3
    assert main(["limits", "clear", "key:alice"]) == 0
    assert show(capsys, "--tier", "pro")["overrides"] == {}
    assert limits_of(show(capsys, "--tier", "pro"))["usd_per_day"] == 10


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--usd-per-day", "-1"], "usd_per_day must not be negative"),
        (["--concurrent-runs", "1.5"], "concurrent_runs must be a whole number"),
        ([], "nothing to set"),
    ],
)
def test_bad_values_are_refused_and_nothing_is_written(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["limits", "set", "key:alice", *argv]) == 2
    assert message in capsys.readouterr().err
    assert show(capsys)["overrides"] == {}


def test_not_a_number_or_a_principal_is_a_usage_error(env: dict[str, str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["limits", "set", "key:alice", "--usd-per-day", "lots"])
    assert caught.value.code == 2
    with pytest.raises(SystemExit):
        main(["limits", "show", "key: alice"])


def test_without_agentloop_limits_it_says_no_limit_is_checked(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLOOP_LIMITS")
    assert main(["limits", "show", "key:alice"]) == 0
    out = capsys.readouterr().out
    assert "no limits apply" in out
    assert "AGENTLOOP_LIMITS is unset" in out


def test_a_store_that_cannot_be_opened_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("AGENTLOOP_STORE", f"sqlite:///{tmp_path / 'file' / 'store.db'}")
    monkeypatch.setenv("AGENTLOOP_LIMITS", json.dumps(DEFAULTS))
    assert main(["limits", "show", "key:alice"]) == 1
    assert "the store failed" in capsys.readouterr().err


def test_the_command_offers_every_limit_the_quota_knows() -> None:
    from agentloop.limits_cli import LIMIT_OPTIONS
    from agentloop.quota.limits import LIMIT_NAMES

    assert LIMIT_OPTIONS == LIMIT_NAMES
