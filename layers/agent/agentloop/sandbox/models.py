"""What crosses the sandbox's boundaries: limits in, an outcome out, and the Lambda messages.

The same models are used by the local backend, the Lambda client and the sandbox function, so
the two backends cannot drift apart in what they accept or return.
"""

from __future__ import annotations

import base64
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentloop.files.limits import MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES

MAX_CODE_CHARS = 20_000


class SandboxLimits(BaseModel):
    """Resource limits for one run. The bounds are hard caps: a request cannot go beyond them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float = Field(default=10.0, gt=0, le=300, description="Wall-clock limit.")
    cpu_s: int | None = Field(
        default=None, ge=1, le=300, description="CPU seconds per process; default timeout + 1."
    )
    memory_mb: int = Field(default=256, ge=64, le=4096, description="Address space (RLIMIT_AS).")
    max_file_mb: int = Field(default=16, ge=1, le=512, description="Largest file (RLIMIT_FSIZE).")
    max_open_files: int = Field(default=64, ge=16, le=1024)
    max_processes: int = Field(
        default=32, ge=1, le=256, description="Processes and threads the program may add."
    )
    max_stdout_bytes: int = Field(default=5_000, ge=100, le=1_000_000)
    max_stderr_bytes: int = Field(default=2_000, ge=100, le=1_000_000)

    @property
    def cpu_limit_s(self) -> int:
        """RLIMIT_CPU: a little over the wall clock, so the clearer timeout usually wins."""
        return self.cpu_s if self.cpu_s is not None else math.ceil(self.timeout_s) + 1


class RunOutcome(BaseModel):
    """How a run ended. A non-zero ``exit_code`` is a normal outcome, not a sandbox failure."""

    model_config = ConfigDict(extra="forbid")

    exit_code: int | None = Field(
        description="The program's exit status; -N when killed by signal N; None if unknown."
    )
    stdout: str
    stderr: str
    truncated: bool = Field(description="Output beyond the caps was cut (head and tail kept).")
    duration_ms: int
    timed_out: bool = False
    killed_by: str | None = Field(default=None, description="Signal name, e.g. SIGKILL, SIGSEGV.")
    notes: list[str] = Field(default_factory=list, description="Plain-language explanations.")


class SandboxRequest(BaseModel):
    """The sandbox function's event."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1, max_length=MAX_CODE_CHARS)
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    files: dict[str, str] | None = Field(
        default=None,
        max_length=MAX_WORKSPACE_FILES,
        description="The working directory's files at the start: relative path -> base64.",
    )

    @field_validator("files")
    @classmethod
    def _safe_files(cls, files: dict[str, str] | None) -> dict[str, str] | None:
        from agentloop.files.names import safe_path

        for path, data in (files or {}).items():
            if safe_path(path) != path:
                raise ValueError(f"not a usable path: {path[:100]!r}")
            if len(data) > MAX_WORKSPACE_BYTES * 4 // 3 + 4:
                raise ValueError(f"{path} is over the working directory's size")
        return files

    def decoded_files(self) -> dict[str, bytes]:
        """The files as bytes (ValueError if one is not base64)."""
        return {p: base64.b64decode(d, validate=True) for p, d in (self.files or {}).items()}


class SandboxResponse(BaseModel):
    """The sandbox function's result: an outcome, or why there is none."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    outcome: RunOutcome | None = None
    workdir: dict[str, Any] | None = Field(
        default=None,
        description="What the working directory held at the end, as the run's shuttle said "
        "(unchecked: agentloop.sandbox.workdir checks it); null: nothing came back.",
    )
    error: str | None = None
    error_kind: Literal["invalid_request", "no_time", "internal"] | None = None

    def to_event(self) -> dict[str, Any]:
        """JSON-able, without the unused top-level fields (the outcome keeps its nulls)."""
        return {k: v for k, v in self.model_dump(mode="json").items() if v is not None}
