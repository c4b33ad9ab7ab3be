"""Where code runs: in this process tree (``local``) or in the sandbox function (``lambda``).

Both end in the same runner; the Lambda backend only carries the request and the outcome
across ``lambda:InvokeFunction``. boto3 (present in the Lambda runtime; locally the ``aws``
extra, which ``make dev`` installs) is imported on first use, and one client per configuration
is kept.

A run belongs to a *tenant*: the caller the chat app authenticated (``SANDBOX_TENANT_KEY`` in
the run's extras). When the sandbox function has Lambda's per-tenant isolation
(``tenancy="per_tenant"``), every invoke carries a ``TenantId`` derived from it, and Lambda
never lets two tenants share an execution environment (docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import threading
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from agentloop.sandbox.isolation import Isolation
from agentloop.sandbox.models import SandboxLimits, SandboxRequest, SandboxResponse
from agentloop.sandbox.runner import Ran, SandboxError, run_program_async
from agentloop.sandbox.service import DISCARD_EXIT_STATUS

# Time the Lambda client waits beyond the run's own limit: a cold start plus the answer.
LAMBDA_OVERHEAD_S = 20.0

Tenancy = Literal["shared", "per_tenant"]

SANDBOX_TENANT_KEY = "sandbox_tenant"
"""Key of the caller's non-secret id in ``ChatContext.extras`` / ``ToolContext.extras``."""

# Lambda's TenantId: 1-256 characters of [a-zA-Z0-9._:/=+-@ ] (API reference, Invoke). Ids
# already short and plain (``bearer:1a2b3c4d``, ``research:nightly``) are kept as they are, so
# logs stay readable; anything else (an IAM ARN has "/") is hashed, which also keeps a
# caller's ARN out of the sandbox, where the code can read its own tenant id.
_PLAIN_TENANT = re.compile(r"[A-Za-z0-9_.:=+@-]{1,64}")


def lambda_tenant_id(caller: str) -> str:
    """The ``TenantId`` for a caller id: always valid for Lambda, the same for the same caller."""
    if _PLAIN_TENANT.fullmatch(caller):
        return caller
    return "sha256:" + hashlib.sha256(caller.encode("utf-8")).hexdigest()[:40]


class Backend(Protocol):
    name: str

    async def run(
        self,
        code: str,
        limits: SandboxLimits,
        *,
        tenant: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> Ran: ...


class LocalBackend:
    """The runner in this process tree, isolated as ``isolation`` says (never the deployed chat)."""

    name = "local"

    def __init__(self, tmp_root: str | None = None, *, isolation: Isolation) -> None:
        self.tmp_root = tmp_root
        self.isolation = isolation

    async def run(
        self,
        code: str,
        limits: SandboxLimits,
        *,
        tenant: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> Ran:
        return await run_program_async(
            code, limits, files=files, tmp_root=self.tmp_root, isolation=self.isolation
        )


_clients: dict[tuple[str | None, str | None, float], Any] = {}
_clients_lock = threading.Lock()


def _lambda_client(region: str | None, endpoint_url: str | None, read_timeout: float) -> Any:
    """A cached boto3 Lambda client; no retries, since a retried invoke runs the code twice."""
    key = (region, endpoint_url, read_timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            import boto3  # type: ignore[import-untyped, unused-ignore]
            from botocore.config import Config  # type: ignore[import-untyped, unused-ignore]

            config = Config(
                connect_timeout=5,
                read_timeout=read_timeout,
                retries={"max_attempts": 1, "mode": "standard"},
            )
            # A session per client: boto3's default session is not thread-safe to create from.
            session = boto3.session.Session()
            client = session.client(
                "lambda", region_name=region, endpoint_url=endpoint_url, config=config
            )
            _clients[key] = client
    return client


class LambdaBackend:
    """Send the code to the sandbox function and return the outcome it ran there.

    ``tenancy="per_tenant"`` must match a function created with ``TenancyConfig: PER_TENANT``:
    Lambda refuses an invoke without a ``TenantId`` there, and one with a ``TenantId`` anywhere
    else. A run without a tenant is refused here rather than sent under a shared one.
    """

    name = "lambda"

    def __init__(
        self,
        function: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        max_timeout_s: float = 30.0,
        tenancy: Tenancy = "shared",
    ) -> None:
        self.function = function
        self.region = region
        self.endpoint_url = endpoint_url
        self.read_timeout = max_timeout_s + LAMBDA_OVERHEAD_S
        self.tenancy: Tenancy = tenancy

    async def run(
        self,
        code: str,
        limits: SandboxLimits,
        *,
        tenant: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> Ran:
        return await asyncio.to_thread(self.invoke, code, limits, tenant=tenant, files=files)

    def invoke(
        self,
        code: str,
        limits: SandboxLimits,
        *,
        tenant: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> Ran:
        from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
            BotoCoreError,
            ClientError,
        )

        client = _lambda_client(self.region, self.endpoint_url, self.read_timeout)
        encoded = {path: base64.b64encode(data).decode() for path, data in (files or {}).items()}
        request = SandboxRequest(code=code, limits=limits, files=encoded or None)
        payload = request.model_dump_json(exclude_none=True)
        params: dict[str, Any] = {
            "FunctionName": self.function,
            "InvocationType": "RequestResponse",
            "Payload": payload.encode(),
        }
        if self.tenancy == "per_tenant":
            params["TenantId"] = self._tenant_id(client, tenant)
        try:
            response = client.invoke(**params)
            body: bytes = response["Payload"].read()
        except ClientError as exc:
            raise self._client_error(exc) from exc
        except BotoCoreError as exc:
            raise SandboxError(
                f"could not reach the code sandbox: {type(exc).__name__}: {exc}",
                hint="try again later, or answer without running code",
            ) from exc
        if response.get("FunctionError"):
            raise self._function_error(body)
        try:
            result = SandboxResponse.model_validate_json(body)
        except ValidationError as exc:
            raise SandboxError(
                f"the code sandbox answered in an unexpected format: {body[:200]!r}"
            ) from exc
        if not result.ok or result.outcome is None:
            raise SandboxError(f"the code sandbox refused the run: {result.error}")
        return Ran(result.outcome, result.workdir)

    def _tenant_id(self, client: Any, tenant: str | None) -> str:
        """The invoke's ``TenantId``; a clear error instead of an unattributed or failing call."""
        if not tenant:
            raise SandboxError(
                "the code sandbox isolates callers, but this run has no caller id",
                hint="the server must set the sandbox tenant of each run (docs/deploy.md)",
            )
        members = client.meta.service_model.operation_model("Invoke").input_shape.members
        if "TenantId" not in members:  # botocore before 1.41 (an old runtime-bundled boto3)
            raise SandboxError(
                "this server's boto3 cannot send a tenant id to the code sandbox",
                hint="the chat function needs boto3/botocore 1.41 or later (docs/deploy.md)",
            )
        return lambda_tenant_id(tenant)

    def _client_error(self, exc: Any) -> SandboxError:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "")) or type(exc).__name__
        message = str(error.get("Message", ""))
        if code == "InvalidParameterValueException" and "tenant" in message.lower():
            return SandboxError(
                f"the sandbox function {self.function!r} refused the call: {message}",
                hint="AGENTLOOP_SANDBOX_TENANCY must be per_tenant exactly when the function "
                "was created with tenant isolation (docs/deploy.md)",
            )
        if code in ("TooManyRequestsException", "ThrottlingException"):
            return SandboxError(
                "the code sandbox is busy: every concurrent run is in use",
                hint="wait a little and try again, or answer without running code",
            )
        if code in ("ResourceNotReadyException", "ResourceConflictException"):
            # A VPC function idle for 14 days goes Inactive; the next invoke fails while
            # Lambda re-creates its network interface (and a function being updated is Pending).
            return SandboxError(
                f"the code sandbox is not ready yet: {message or code}",
                hint="try again in a minute or two, or answer without running code",
            )
        if code == "ResourceNotFoundException":
            return SandboxError(
                f"the sandbox function {self.function!r} does not exist",
                hint="set AGENTLOOP_SANDBOX_FUNCTION to the deployed SandboxFunction",
            )
        if code in ("AccessDeniedException", "AccessDenied"):
            return SandboxError(
                f"not allowed to invoke the sandbox function {self.function!r}",
                hint="the chat function's role needs lambda:InvokeFunction on it",
            )
        return SandboxError(f"invoking the code sandbox failed: {code}: {message}")

    @staticmethod
    def _function_error(body: bytes) -> SandboxError:
        """The sandbox function itself failed (timed out, ran out of memory, crashed)."""
        try:
            detail = json.loads(body)
        except ValueError:
            detail = {}
        if not isinstance(detail, dict):
            detail = {}
        message = str(detail.get("errorMessage") or body[:200].decode("utf-8", "replace"))
        kind = str(detail.get("errorType") or "")
        if kind == "Runtime.ExitError" and f"exit status {DISCARD_EXIT_STATUS}" in message:
            return SandboxError(
                "the code sandbox could not rule out that a process of this program was still "
                "running, so it discarded its environment; the program's result is lost",
                hint="running it again is safe (it starts in a fresh environment); a program "
                "that leaves processes behind (detached, daemon threads) may cause this",
            )
        if "timed out" in message.lower():
            return SandboxError(
                "the code sandbox timed out before the program finished",
                hint="use a shorter timeout_s or a faster program",
            )
        return SandboxError(
            f"the code sandbox failed: {kind + ': ' if kind else ''}{message}",
            hint="the program may have used too much memory; try a smaller computation",
        )


def running_on_lambda() -> bool:
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))
