"""The default model follows the provider keys; /v1/models lists what those keys can use; the
start-up line says which model answers and which providers have keys, never a key."""

from __future__ import annotations

import logging

import pytest

from agentloop.config import AgentConfig
from agentloop.llm.registry import (
    PROVIDERS,
    default_model_for,
    describe_models,
    listed_models,
    providers_with_keys,
)

GROQ_DEFAULT = "groq:llama-3.3-70b-versatile"
OPENAI_DEFAULT = "openai:gpt-4o-mini"
GROQ = {"GROQ_API_KEY": "gsk-groq-value-1234"}
OPENAI = {"OPENAI_API_KEY": "sk-openai-value-5678"}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, GROQ_DEFAULT),  # no key: Groq's, whose runs name GROQ_API_KEY
        (OPENAI, OPENAI_DEFAULT),
        (GROQ, GROQ_DEFAULT),
        ({**GROQ, **OPENAI}, GROQ_DEFAULT),
        ({**OPENAI, "GROQ_API_KEY": ""}, OPENAI_DEFAULT),  # empty is not set
        ({**OPENAI, "AGENTLOOP_DEFAULT_MODEL": ""}, OPENAI_DEFAULT),  # as the template leaves it
        # Set, it wins, even without its provider's key (the run's error names the key).
        ({**OPENAI, "AGENTLOOP_DEFAULT_MODEL": "groq:qwen/qwen3-32b"}, "groq:qwen/qwen3-32b"),
        ({**GROQ, "AGENTLOOP_DEFAULT_MODEL": "openai:gpt-4.1"}, "openai:gpt-4.1"),
        # The allow-list is respected: a default it forbids would refuse every request.
        ({**GROQ, **OPENAI, "AGENTLOOP_ALLOWED_MODELS": "openai:*"}, OPENAI_DEFAULT),
        ({**OPENAI, "AGENTLOOP_ALLOWED_MODELS": "groq:*"}, GROQ_DEFAULT),
        ({**OPENAI, "AGENTLOOP_ALLOWED_MODELS": "openai:gpt-4o-mini, groq:*"}, OPENAI_DEFAULT),
        # ... and a default it leaves out gives way to a model of that provider it names.
        ({**OPENAI, "AGENTLOOP_ALLOWED_MODELS": "groq:*,openai:gpt-4.1"}, "openai:gpt-4.1"),
        ({**GROQ, "AGENTLOOP_ALLOWED_MODELS": "openai:gpt-4.1"}, "openai:gpt-4.1"),
        ({**GROQ, "AGENTLOOP_ALLOWED_MODELS": "mistral:*"}, GROQ_DEFAULT),  # nothing usable
    ],
)
def test_the_default_model_follows_the_keys(environ: dict[str, str], expected: str) -> None:
    assert AgentConfig.from_env(environ).default_model == expected


def test_the_class_default_is_the_choice_without_keys() -> None:
    """``AgentConfig()`` (tests, scripts) and ``from_env`` with no key agree."""
    assert AgentConfig().default_model == default_model_for({}) == GROQ_DEFAULT
    assert [p.default_spec for p in PROVIDERS.values()] == [GROQ_DEFAULT, OPENAI_DEFAULT]


def test_providers_with_keys_are_named_in_order_of_preference() -> None:
    assert providers_with_keys({**OPENAI, **GROQ}) == ["groq", "openai"]
    assert providers_with_keys({"OPENAI_API_KEY": "", "GROQ_API_KEY": ""}) == []


OPENAI_LISTED = [f"openai:{m}" for m in PROVIDERS["openai"].listed_models]
GROQ_LISTED = [f"groq:{m}" for m in PROVIDERS["groq"].listed_models]


@pytest.mark.parametrize(
    ("default", "allowed", "keyed", "expected"),
    [
        # No allow-list: every keyed provider's listed models, the default first.
        (OPENAI_DEFAULT, None, ["openai"], OPENAI_LISTED),
        (GROQ_DEFAULT, None, ["groq", "openai"], [*GROQ_LISTED, *OPENAI_LISTED]),
        # Without a key the default is still listed: its runs say which key to set.
        (GROQ_DEFAULT, None, [], [GROQ_DEFAULT]),
        # The allow-list: 'provider:*' as the provider's listed models, exact entries as they
        # are, both only for providers with a key; unknown providers and odd patterns skipped.
        (
            "openai:gpt-4.1",
            ("groq:*", "openai:o3", "openai:gpt-4.1", "mistral:x", "openai:gpt-*", "openai:"),
            ["openai"],
            ["openai:gpt-4.1", "openai:o3"],
        ),
        (
            OPENAI_DEFAULT,
            ("groq:*", "openai:*"),
            ["groq", "openai"],
            [OPENAI_DEFAULT, *GROQ_LISTED, *OPENAI_LISTED[1:]],  # the allow-list's order
        ),
    ],
)
def test_listed_models(
    default: str, allowed: tuple[str, ...] | None, keyed: list[str], expected: list[str]
) -> None:
    listed = listed_models(default, allowed, keyed)
    assert listed[0] == default
    assert listed == expected


def test_start_up_line_with_only_an_openai_key() -> None:
    level, line = describe_models(OPENAI_DEFAULT, OPENAI)
    assert level == logging.INFO
    assert line == (
        "model openai:gpt-4o-mini answers (chosen from the keys set; AGENTLOOP_DEFAULT_MODEL "
        "picks another); providers with keys: openai"
    )


def test_start_up_line_without_any_key_says_what_to_set() -> None:
    level, line = describe_models(GROQ_DEFAULT, {})
    assert level == logging.WARNING
    assert line.startswith("no provider key is set: set GROQ_API_KEY or OPENAI_API_KEY;")
    assert GROQ_DEFAULT in line


def test_start_up_line_for_a_chosen_model_whose_key_is_missing() -> None:
    environ = {**OPENAI, "AGENTLOOP_DEFAULT_MODEL": GROQ_DEFAULT}
    level, line = describe_models(GROQ_DEFAULT, environ)
    assert level == logging.WARNING
    assert "set by AGENTLOOP_DEFAULT_MODEL" in line
    assert "GROQ_API_KEY is not set" in line
    assert line.endswith("providers with keys: openai")


def test_start_up_line_for_a_malformed_default() -> None:
    level, line = describe_models("llama", {**GROQ, "AGENTLOOP_DEFAULT_MODEL": "llama"})
    assert level == logging.WARNING
    assert "not of the form 'provider:model'" in line


@pytest.mark.parametrize("environ", [{}, GROQ, OPENAI, {**GROQ, **OPENAI}])
def test_no_key_value_ever_appears_in_the_start_up_line(environ: dict[str, str]) -> None:
    for default in (GROQ_DEFAULT, OPENAI_DEFAULT, "bad"):
        _, line = describe_models(default, environ)
        for value in (*GROQ.values(), *OPENAI.values()):
            assert value not in line
