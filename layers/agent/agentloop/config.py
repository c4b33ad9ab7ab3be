"""Server-side settings: defaults for requests, the caps a request cannot exceed.

Read from ``AGENTLOOP_*`` environment variables (the SAM template sets them from
its parameters); every field has a default that works locally. The default model, when
``AGENTLOOP_DEFAULT_MODEL`` is not set, follows the provider keys in the environment, so
``from_env`` is called once they are there (after the secret is read, in AWS).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentloop.pricing import PriceOverride, parse_prices

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful research assistant. Use the tools when they help you answer "
    "accurately; cite the sources you used. When you have enough information, answer "
    "directly and concisely."
)


DEFAULT_MODEL_ENV = "AGENTLOOP_DEFAULT_MODEL"


class ConfigurationError(Exception):
    """The deployment, not the request, is wrong: a missing key, an unknown provider."""


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default_model: str = Field(
        default="groq:llama-3.3-70b-versatile",
        description="'provider:model' for requests that name none; from_env without "
        "AGENTLOOP_DEFAULT_MODEL: chosen from the keys set (llm.registry.default_model_for).",
    )
    allowed_models: tuple[str, ...] | None = Field(
        default=None, description="'provider:model' or 'provider:*' entries; None allows all."
    )
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    default_tools: tuple[str, ...] | None = Field(
        default=None, description="Tools offered when a request names none; None: all but opt-in."
    )

    max_iterations: int = Field(default=10, ge=1)
    max_iterations_cap: int = Field(default=25, ge=1)
    token_budget: int = Field(default=200_000, ge=1)
    token_budget_cap: int = Field(default=1_000_000, ge=1)
    final_answer_reserve: int = Field(
        default=4_096, ge=0, description="Tokens kept back from ordinary turns for the answer."
    )
    max_output_tokens: int = Field(default=4_096, ge=16)
    max_cost_usd: float | None = Field(
        default=None, gt=0, description="Dollars a request may spend when it names none."
    )
    max_cost_usd_cap: float | None = Field(
        default=None, gt=0, description="Dollars no request may spend more than (None: no cap)."
    )
    prices: dict[str, PriceOverride] = Field(
        default_factory=dict,
        description="'provider:model' -> dollars per million input / cached_input / output "
        "tokens, before the genai-prices table (AGENTLOOP_PRICES, JSON).",
    )

    tool_concurrency: int = Field(default=4, ge=1)
    tool_timeout_s: float = Field(default=30.0, gt=0)
    tool_result_max_chars: int = Field(default=8_000, ge=200)

    approval_tools: tuple[str, ...] = Field(
        default=(), description="Tools whose calls wait for a person's approval."
    )
    tool_limits: dict[
        Annotated[str, Field(min_length=1, max_length=128)],
        Annotated[int, Field(ge=0, le=10_000)],
    ] = Field(
        default_factory=dict,
        description="Tool name -> the most calls of it one request may run, every sub-agent "
        "included (AGENTLOOP_TOOL_LIMITS, JSON); a request may lower these, never raise them. "
        "0: the tool is never offered.",
    )
    max_depth: int = Field(
        default=1, ge=0, description="Sub-agent nesting: 1 lets the top level use ask_llm."
    )
    subagent_max_iterations: int = Field(default=5, ge=1)
    subagent_concurrency: int = Field(default=3, ge=1)

    fallback_models: tuple[str, ...] = Field(
        default=(), description="'provider:model' to switch to, in order, when one is down."
    )
    retry_max_attempts: int = Field(default=3, ge=1)
    retry_base_delay_s: float = Field(default=0.5, ge=0)
    retry_max_delay_s: float = Field(default=8.0, ge=0)

    compaction: bool = Field(default=True, description="Send the model a compacted history.")
    tool_preview_chars: int = Field(default=400, ge=0)
    context_max_chars: int = Field(default=400_000, ge=1_000)

    model_timeout_s: float = Field(default=60.0, gt=0)
    deadline_reserve_s: float = Field(
        default=10.0, ge=0, description="No new turn starts with less time left than this."
    )

    @field_validator("prices", mode="before")
    @classmethod
    def _prices_json(cls, value: Any) -> Any:
        return parse_prices(value) if isinstance(value, str) else value

    @field_validator("tool_limits", mode="before")
    @classmethod
    def _tool_limits_json(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f'AGENTLOOP_TOOL_LIMITS is not JSON (expected {{"tool": calls}}): {exc}'
            ) from exc

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AgentConfig:
        """Build from ``AGENTLOOP_<FIELD>`` variables; lists are comma-separated.

        ``AGENTLOOP_DEFAULT_MODEL`` unset (or empty, as the template leaves it): the default
        model is chosen from the provider keys in ``environ`` (Groq's if GROQ_API_KEY is set,
        else OpenAI's if OPENAI_API_KEY is, else Groq's, whose runs then name the key to set).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            raw = env.get(f"AGENTLOOP_{name.upper()}")
            if raw is None or raw == "":
                continue
            if "tuple" in str(field.annotation):
                values[name] = tuple(part.strip() for part in raw.split(",") if part.strip())
            else:
                values[name] = raw
        if "default_model" not in values:
            # Imported here: the registry imports this module.
            from agentloop.llm.registry import default_model_for

            values["default_model"] = default_model_for(env, values.get("allowed_models"))
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid AGENTLOOP_* setting: {exc}") from exc
