"""How execute_code is set up: the backend and the default limits, from ``AGENTLOOP_SANDBOX_*``.

The backend defaults to ``lambda`` when ``AGENTLOOP_SANDBOX_FUNCTION`` names the sandbox
function (the SAM template sets it on the chat function) and to ``local`` otherwise, so a
laptop needs no setting and a deployment cannot forget one. The local backend is isolated
with namespaces (``AGENTLOOP_SANDBOX_ISOLATION=auto``, the default, or ``namespaces``); where
that is impossible it is not offered, unless the operator names ``unisolated``.

The libraries programs get besides the standard library: locally the stack
``AGENTLOOP_SANDBOX_STACK`` names, or ``./.sandbox-stack`` (``make sandbox-stack``); for the
``lambda`` backend the list ``AGENTLOOP_SANDBOX_LIBRARIES`` (the template sets it from the
layer's pins). With libraries, ``memory_mb`` defaults to 512: numpy, pandas and matplotlib
take about 230 MB of address space before a program has any data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentloop.config import ConfigurationError
from agentloop.sandbox.backends import Backend, LambdaBackend, LocalBackend, Tenancy
from agentloop.sandbox.isolation import IsolationSetting, resolve
from agentloop.sandbox.models import SandboxLimits
from agentloop.sandbox.stack import Stack, find

ENV_PREFIX = "AGENTLOOP_SANDBOX_"
# The default memory_mb when programs get libraries: their imports alone take about 230 MB of
# address space (measured: numpy + pandas + matplotlib.pyplot and one small plot).
STACK_MEMORY_MB = 512


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["local", "lambda"] = "local"
    function: str | None = Field(default=None, description="Sandbox function name or ARN.")
    region: str | None = Field(default=None, description="Its region; default: boto3's.")
    endpoint_url: str | None = Field(default=None, description="Lambda API endpoint override.")
    max_timeout_s: float = Field(
        default=30.0, gt=0, le=300, description="The most a call may ask for with timeout_s."
    )
    limits: SandboxLimits = Field(
        default_factory=SandboxLimits, description="Per-run limits; timeout_s is the default."
    )
    tmp_root: str | None = Field(default=None, description="Local backend: parent of work dirs.")
    allow_local_on_lambda: bool = Field(
        default=False,
        description="Let the local backend run inside a Lambda function (never for the chat).",
    )
    isolation: IsolationSetting = Field(
        default="auto",
        description="Local backend: namespaces (auto: where bwrap works, else no execute_code), "
        "or unisolated (the program runs with this server's user, files and network).",
    )
    tenancy: Tenancy = Field(
        default="shared",
        description="per_tenant: send each run's caller as the invoke's TenantId (the sandbox "
        "function has Lambda tenant isolation; the template sets this).",
    )
    stack: str | None = Field(
        default=None,
        description="Local backend: the stack directory (make sandbox-stack), or none; "
        "default ./.sandbox-stack when built.",
    )
    libraries: list[str] = Field(
        default_factory=list,
        description="Lambda backend: the libraries the sandbox function's stack has "
        "(comma-separated in AGENTLOOP_SANDBOX_LIBRARIES).",
    )

    @field_validator("libraries", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @model_validator(mode="before")
    @classmethod
    def _stack_memory(cls, data: Any) -> Any:
        """memory_mb defaults to STACK_MEMORY_MB when programs get libraries."""
        if not isinstance(data, dict) or not _has_libraries(data):
            return data
        limits = data.get("limits")
        if isinstance(limits, SandboxLimits):
            if "memory_mb" not in limits.model_fields_set:
                limits = limits.model_copy(update={"memory_mb": STACK_MEMORY_MB})
        elif isinstance(limits, dict) or limits is None:
            limits = {"memory_mb": STACK_MEMORY_MB, **(limits or {})}
        return {**data, "limits": limits}

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.backend == "lambda" and not self.function:
            raise ValueError("the lambda backend needs the sandbox function's name")
        if self.limits.timeout_s > self.max_timeout_s:
            raise ValueError(
                f"the default timeout ({self.limits.timeout_s:g} s) is above "
                f"max_timeout_s ({self.max_timeout_s:g} s)"
            )
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SandboxSettings:
        """Read ``AGENTLOOP_SANDBOX_<FIELD>``; limit fields too (``..._MEMORY_MB``)."""
        env = os.environ if environ is None else environ

        def read(name: str) -> str | None:
            raw = env.get(f"{ENV_PREFIX}{name.upper()}", "").strip()
            return raw or None

        values: dict[str, Any] = {}
        for name in cls.model_fields:
            if name != "limits" and (raw := read(name)) is not None:
                values[name] = raw
        limits = {name: raw for name in SandboxLimits.model_fields if (raw := read(name))}
        if limits:
            values["limits"] = limits
        values.setdefault("backend", "lambda" if values.get("function") else "local")
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid {ENV_PREFIX}* setting: {exc}") from exc

    def make_backend(self) -> Backend:
        if self.backend == "lambda":
            assert self.function is not None  # checked by the validator
            return LambdaBackend(
                self.function,
                region=self.region,
                endpoint_url=self.endpoint_url,
                max_timeout_s=self.max_timeout_s,
                tenancy=self.tenancy,
            )
        # IsolationUnavailable when the local backend cannot be isolated as asked.
        return LocalBackend(self.tmp_root, isolation=resolve(self.isolation, self.local_stack()))

    def local_stack(self) -> Stack | None:
        """The stack the local backend gives programs (ConfigurationError if it is unusable)."""
        return find(self.stack)

    def offered_libraries(self) -> list[str]:
        """``["numpy 2.4.6", ...]`` that programs can import on this backend; [] for none."""
        if self.backend == "lambda":
            return list(self.libraries)
        stack = self.local_stack()
        return stack.libraries() if stack else []

    def describe(self) -> str:
        """Which backend runs code, and how it is isolated: for the start-up log and /healthz."""
        libraries = ", ".join(self.offered_libraries()) or "standard library only"
        if self.backend == "lambda":
            return f"lambda (the sandbox function; tenancy {self.tenancy}; {libraries})"
        return f"local, {resolve(self.isolation).describe()}; {libraries}"


def _has_libraries(data: dict[str, Any]) -> bool:
    """Whether the settings in ``data`` (not yet validated) give programs any libraries."""
    if data.get("backend", "local") == "lambda":
        raw = data.get("libraries") or []
        return bool(raw.strip(",").strip() if isinstance(raw, str) else raw)
    setting = data.get("stack")
    if setting is not None and not isinstance(setting, str):
        return False  # the field's own validation says why
    try:
        return find(setting) is not None
    except ConfigurationError:
        return False  # reported when the backend is made
