"""execute_code: run a model-written Python program in the sandbox and return what it printed.

The result is the run's outcome - ``{exit_code, stdout, stderr, truncated, duration_ms,
timed_out, killed_by, notes}`` - and a program that fails (a traceback, a non-zero exit, a
time limit) is an ordinary result the model reads and fixes; only a sandbox that cannot run
anything is a tool error. See docs/tools.md for what each backend protects against.
"""

# No `from __future__ import annotations` here: the arguments model is built per settings
# inside the factory, and @tool resolves the function's annotations at decoration time.

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentloop.sandbox.backends import SANDBOX_TENANT_KEY
from agentloop.sandbox.models import MAX_CODE_CHARS, SandboxLimits
from agentloop.sandbox.runner import SandboxError
from agentloop.sandbox.settings import SandboxSettings
from agentloop.tools.base import Tool, ToolContext, ToolError, tool

__all__ = ["SandboxSettings", "execute_code_mode", "execute_code_tool"]

# Seconds kept back from the request's deadline (and added to the tool's own timeout) for
# starting the run and bringing the outcome back: more when a Lambda call is involved.
OVERHEAD_S = {"local": 3.0, "lambda": 25.0}
MIN_RUN_S = 0.5

DESCRIPTION = (
    "Run a Python 3 program and return its exit_code, stdout and stderr. Use it to compute, "
    "parse or check things exactly instead of guessing. {libraries}; every call starts "
    "from scratch (no variables or files are kept between calls); do not count on network "
    "access. Limits: {timeout:g} s by default (ask for up to "
    "{max_timeout:g} s with timeout_s), {memory} MB of memory, {processes} processes and "
    "threads, files up to {file_mb} MB in the working directory. Only what the program prints "
    "comes back, so print() the results; output over about {stdout:,} characters is cut (the "
    "start and end are kept). A non-zero exit_code or a traceback is a normal result: read "
    "stderr, fix the program and run it again."
)


def execute_code_mode(settings: SandboxSettings | None = None) -> str:
    """Where execute_code runs and how it is isolated, or why it is off: said at start-up."""
    from agentloop.sandbox.isolation import IsolationUnavailable

    try:
        return (settings or SandboxSettings.from_env()).describe()
    except IsolationUnavailable as exc:
        return f"off: {exc}"


def execute_code_tool(settings: SandboxSettings | None = None) -> Tool:
    """The execute_code tool on the configured backend (default: from the environment)."""
    config = settings or SandboxSettings.from_env()
    backend = config.make_backend()
    limits = config.limits
    max_timeout = config.max_timeout_s
    allow_local_on_lambda = config.allow_local_on_lambda
    overhead = OVERHEAD_S[config.backend]

    class ExecuteCodeArgs(BaseModel):
        model_config = ConfigDict(extra="forbid")

        code: str = Field(
            min_length=1,
            max_length=MAX_CODE_CHARS,
            description="A complete Python 3 program; print() what you need to see.",
        )
        timeout_s: float = Field(
            default=limits.timeout_s,
            gt=0,
            le=max_timeout,
            description="Wall-clock limit in seconds.",
        )

    @tool(
        name="execute_code",
        description=_description(limits, max_timeout, config.offered_libraries()),
        timeout_s=max_timeout + overhead,
    )
    async def execute_code(args: ExecuteCodeArgs, ctx: ToolContext) -> dict[str, Any]:
        _refuse_local_on_lambda(backend.name, allow_local_on_lambda)
        run_limits = _run_limits(limits, args.timeout_s, ctx, overhead)
        # Who the run is for: with per-tenant isolation, the sandbox environment it may use.
        tenant = ctx.extras.get(SANDBOX_TENANT_KEY)
        try:
            outcome = await backend.run(
                args.code, run_limits, tenant=tenant if isinstance(tenant, str) else None
            )
        except SandboxError as exc:
            raise ToolError(exc.message, hint=exc.hint) from exc
        return outcome.model_dump(mode="json")

    return execute_code


def _description(
    limits: SandboxLimits, max_timeout: float, libraries: list[str] | None = None
) -> str:
    """The tool's description, with the limits and libraries this server really has."""
    installed = (
        f"Besides the standard library, {', '.join(libraries)} are installed (matplotlib "
        "draws off-screen: save figures with savefig)"
        if libraries
        else "Only the standard library is available"
    )
    return DESCRIPTION.format(
        libraries=installed,
        timeout=limits.timeout_s,
        max_timeout=max_timeout,
        memory=limits.memory_mb,
        processes=limits.max_processes,
        file_mb=limits.max_file_mb,
        stdout=limits.max_stdout_bytes,
    )


def _refuse_local_on_lambda(backend: str, allow_local_on_lambda: bool) -> None:
    """No local runs inside a Lambda function unless allowed (never for the chat)."""
    if (
        backend == "local"
        and os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
        and not allow_local_on_lambda
    ):
        # Code run here could read this function's credentials and keys.
        raise ToolError(
            "execute_code is not configured: this server has no sandbox function",
            hint="answer without running code",
        )


def _run_limits(
    limits: SandboxLimits, timeout_s: float, ctx: ToolContext, overhead: float
) -> SandboxLimits:
    """This run's limits: its time limit cut to what the request's deadline leaves."""
    timeout = min(timeout_s, ctx.deadline.remaining() - overhead)
    if timeout < MIN_RUN_S:
        raise ToolError(
            "too little time is left in this request to run code",
            hint="answer with what you have",
        )
    return limits.model_copy(update={"timeout_s": round(timeout, 1)})
