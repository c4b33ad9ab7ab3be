"""Where code runs: in this process tree (``local``) or in the sandbox function (``lambda``).

Both end in the same runner; the Lambda backend only carries the request and the outcome
across ``lambda:InvokeFunction``. boto3 (present in the Lambda runtime, a dev dependency
locally) is imported on first use, and one client per configuration is kept.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any, Protocol

from pydantic import ValidationError

from agentloop.sandbox.models import RunOutcome, SandboxLimits, SandboxRequest, SandboxResponse
from agentloop.sandbox.runner import SandboxError, run_python_async

# Time the Lambda client waits beyond the run's own limit: a cold start plus the answer.
LAMBDA_OVERHEAD_S = 20.0


class Backend(Protocol):
    name: str

    async def run(self, code: str, limits: SandboxLimits) -> RunOutcome: ...


class LocalBackend:
    """The runner in this process tree: fine for development, never for the deployed chat."""

    name = "local"

    def __init__(self, tmp_root: str | None = None) -> None:
        self.tmp_root = tmp_root

    async def run(self, code: str, limits: SandboxLimits) -> RunOutcome:
        return await run_python_async(code, limits, tmp_root=self.tmp_root)


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
    """Send the code to the sandbox function and return the outcome it ran there."""

    name = "lambda"

    def __init__(
        self,
        function: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        max_timeout_s: float = 30.0,
    ) -> None:
        self.function = function
        self.region = region
        self.endpoint_url = endpoint_url
        self.read_timeout = max_timeout_s + LAMBDA_OVERHEAD_S

    async def run(self, code: str, limits: SandboxLimits) -> RunOutcome:
        return await asyncio.to_thread(self.invoke, code, limits)

    def invoke(self, code: str, limits: SandboxLimits) -> RunOutcome:
        from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
            BotoCoreError,
            ClientError,
        )

        client = _lambda_client(self.region, self.endpoint_url, self.read_timeout)
        payload = SandboxRequest(code=code, limits=limits).model_dump_json(exclude_none=True)
        try:
            response = client.invoke(
                FunctionName=self.function,
                InvocationType="RequestResponse",
                Payload=payload.encode(),
            )
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
        return result.outcome

    def _client_error(self, exc: Any) -> SandboxError:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "")) or type(exc).__name__
        message = str(error.get("Message", ""))
        if code in ("TooManyRequestsException", "ThrottlingException"):
            return SandboxError(
                "the code sandbox is busy: every concurrent run is in use",
                hint="wait a little and try again, or answer without running code",
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
