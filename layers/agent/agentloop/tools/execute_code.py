"""execute_code: run a model-written Python program in the sandbox and return what it printed.

The result is the run's outcome - ``{exit_code, stdout, stderr, truncated, duration_ms,
timed_out, killed_by, notes}`` - and a program that fails (a traceback, a non-zero exit, a
time limit) is an ordinary result the model reads and fixes; only a sandbox that cannot run
anything is a tool error. See docs/tools.md for what each backend protects against.
"""

# No `from __future__ import annotations` here: the arguments model is built per settings
# inside the factory, and @tool resolves the function's annotations at decoration time.

import os

from pydantic import BaseModel, ConfigDict, Field

from agentloop.files.blobs import FilesUnavailable
from agentloop.files.limits import MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES
from agentloop.files.media import media_type
from agentloop.files.models import FileRef
from agentloop.files.workspace import WORKSPACE_KEY, Workspace
from agentloop.sandbox.backends import SANDBOX_TENANT_KEY, Backend
from agentloop.sandbox.models import MAX_CODE_CHARS, SandboxLimits
from agentloop.sandbox.runner import SandboxError
from agentloop.sandbox.settings import SandboxSettings
from agentloop.sandbox.workdir import Settled, settle
from agentloop.tools.base import Tool, ToolContext, ToolError, tool
from agentloop.tools.results import ToolOutput

__all__ = ["SandboxSettings", "execute_code_mode", "execute_code_tool"]

# Seconds kept back from the request's deadline (and added to the tool's own timeout) for
# starting the run and bringing the outcome back: more when a Lambda call is involved.
OVERHEAD_S = {"local": 3.0, "lambda": 25.0}
MIN_RUN_S = 0.5

DESCRIPTION = (
    "Run a Python 3 program and return its exit_code, stdout and stderr. Use it to compute, "
    "parse or check things exactly instead of guessing. {libraries}. The working directory "
    "holds the person's attached files and keeps the files you write from one call to the "
    "next (variables are not kept); save what the person should see in output/ (a chart: "
    "plt.savefig('output/chart.png')): those files are shown to them, so never print their "
    "contents. No network. Limits: {timeout:g} s by default (ask for up to {max_timeout:g} s "
    "with timeout_s), {memory} MB of memory, {processes} processes and threads, "
    "{max_files} files of {files_mb} MB in all. Only what the program prints comes back, so "
    "print() the results; output over about {stdout:,} characters is cut. A non-zero "
    "exit_code or a traceback is a normal result: read stderr, fix the program and run it "
    "again."
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
    async def execute_code(args: ExecuteCodeArgs, ctx: ToolContext) -> ToolOutput:
        _refuse_local_on_lambda(backend.name, allow_local_on_lambda)
        run_limits = _run_limits(limits, args.timeout_s, ctx, overhead)
        workspace = ctx.extras.get(WORKSPACE_KEY)
        if not isinstance(workspace, Workspace):  # no server around it (a job, the CLI)
            workspace = Workspace(owner="")
        async with workspace.lock:  # one program at a time sees and changes the directory
            return await _run(backend, args.code, run_limits, ctx, workspace)

    return execute_code


async def _run(
    backend: Backend, code: str, limits: SandboxLimits, ctx: ToolContext, workspace: Workspace
) -> ToolOutput:
    """One program in the workspace's directory; its outcome, the files it made kept."""
    # Who the run is for: with per-tenant isolation, the sandbox environment it may use.
    tenant = ctx.extras.get(SANDBOX_TENANT_KEY)
    try:
        before = await workspace.snapshot()
        ran = await backend.run(
            code, limits, tenant=tenant if isinstance(tenant, str) else None, files=before
        )
    except SandboxError as exc:
        raise ToolError(exc.message, hint=exc.hint) from exc
    except FilesUnavailable as exc:
        raise ToolError(
            f"the working directory could not be loaded: {exc}",
            hint="try again later, or answer without running code",
        ) from exc
    outcome = ran.outcome
    stopped = outcome.timed_out or outcome.exit_code is None
    settled = settle(before, ran.workdir, stopped)
    result = outcome.model_dump(mode="json")
    result["notes"] += settled.notes
    refs = await _keep(workspace, settled, ctx.call_id, result["notes"])
    if settled.made:
        result["files"] = [
            {"name": m.name, "media_type": media_type(m.name), "size": len(m.data)}
            for m in settled.made
        ]
    return ToolOutput(result, tuple(refs))


async def _keep(
    workspace: Workspace, settled: Settled, call_id: str, notes: list[str]
) -> list[FileRef]:
    """The new working directory, and the files made for the person; what went wrong in
    ``notes`` (the program's outcome stands either way)."""
    if settled.files is None:
        return []
    try:
        await workspace.apply(settled.files)
        refs = await workspace.keep(settled.made, call_id)
    except FilesUnavailable as exc:
        notes.append(f"The files could not be kept ({exc}); they are lost.")
        return []
    if settled.made and not refs:
        notes.append("This server keeps no files: what was written to output/ was not shown.")
    return refs


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
        max_files=MAX_WORKSPACE_FILES,
        files_mb=f"{MAX_WORKSPACE_BYTES / 1024 / 1024:g}",
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
