"""template.yaml's Limits parameter: AGENTLOOP_LIMITS on the chat function, read by the app's
own ``limits_from_env``; empty (the default), no limits and no store call."""

from __future__ import annotations

import json

import pytest

from agentloop.config import ConfigurationError
from agentloop.quota import limits_from_env
from tests.cloudformation import Stack, load_template

PHYSICAL = {"AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012", "AWS::NoValue": None}
PHYSICAL |= {"AWS::URLSuffix": "amazonaws.com"}


def chat_environment(**parameters: str) -> dict[str, str]:
    return Stack(load_template(), PHYSICAL, **parameters).chat_environment()


def test_by_default_the_chat_function_has_no_limits() -> None:
    environment = chat_environment()
    assert "AGENTLOOP_LIMITS" not in environment  # empty: left out, read as unset
    assert limits_from_env(environment) is None


def test_the_limits_parameter_reaches_the_chat_function_as_the_app_reads_it() -> None:
    limits = {
        "default": {"usd_per_day": 1, "concurrent_runs": 2},
        "tiers": {"pro": {"usd_per_day": 10}},
    }
    config = limits_from_env(chat_environment(Limits=json.dumps(limits)))
    assert config is not None
    # dollars are kept as micro-dollars
    assert config.for_tier(None) == {"usd_per_day": 1_000_000, "concurrent_runs": 2}
    assert config.for_tier("pro") == {"usd_per_day": 10_000_000, "concurrent_runs": 2}
    with pytest.raises(ConfigurationError, match="AGENTLOOP_LIMITS"):
        limits_from_env(chat_environment(Limits="{not json"))
