"""A loopback fake of the Lambda Invoke API, calling real handlers in-process.

``POST /2015-03-31/functions/{name}/invocations`` as boto3 sends it (``InvocationType`` in
``X-Amz-Invocation-Type``, the event as the body), answered the way the service answers:

* the handler's JSON result with 200 and ``X-Amz-Executed-Version``;
* a handler that raises: 200 with ``X-Amz-Function-Error: Unhandled`` and
  ``{"errorMessage", "errorType", "requestId", "stackTrace"}``;
* a run past the function's timeout: the same, with ``errorType: Sandbox.Timedout`` and
  "Task timed out after N seconds";
* service errors as JSON with the code in ``x-amzn-ErrorType`` (an unknown function is a 404
  ``ResourceNotFoundException``, a throttle a 429 ``TooManyRequestsException``, ``not_ready``
  the 502 ``ResourceNotReadyException`` of a VPC function gone Inactive);
* tenant isolation: boto3 sends ``TenantId`` in the ``X-Amz-Tenant-Id`` header (botocore's
  service model: ``location: header``). A function registered with ``per_tenant=True``
  answers an invoke without one - and any other function an invoke with one - with a 400
  ``InvalidParameterValueException``, as the Lambda troubleshooting guide describes; a
  tenant id outside the documented 1-256 characters of ``[a-zA-Z0-9._:/=+-@ ]`` is refused
  the same way. Each invocation records the tenant it carried, and the handler's context
  has it as ``tenant_id``.

Point boto3 at it with ``endpoint_url`` (and dummy credentials): nothing in boto3 is mocked.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.loopback import LoopbackServer

Handler = Callable[[Any, Any], Any]
ACCOUNT = "123456789012"
REGION = "us-east-1"
SANDBOX_FUNCTION = "agentloop-sandbox"
"""The name the tests register the sandbox function's handler under (``lambda_api``)."""
TENANT_HEADER = "x-amz-tenant-id"
# Invoke's TenantId in the Lambda API reference: length 1-256, this pattern.
TENANT_ID = re.compile(r"[a-zA-Z0-9._:/=+\-@ ]{1,256}")
# The message the troubleshooting guide quotes for both mismatches.
TENANT_MISMATCH = (
    "Tenant ID configuration not specified or passed to a function when tenant isolation "
    "is not enabled."
)


@dataclass
class FakeContext:
    """The parts of Lambda's context object a handler reads."""

    function_name: str
    timeout_s: float
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)
    tenant_id: str | None = None

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.started + self.timeout_s - time.monotonic()) * 1000))


@dataclass
class Invocation:
    function: str
    invocation_type: str
    event: Any
    tenant: str | None = None
    """The ``X-Amz-Tenant-Id`` header as received (None when absent)."""


def _service_error(status: int, code: str, message: str, **extra: str) -> Response:
    return JSONResponse(
        {"Type": "User", "message": message, **extra},
        status_code=status,
        headers={"x-amzn-ErrorType": code, "x-amzn-RequestId": str(uuid.uuid4())},
    )


class FakeLambda(LoopbackServer):
    """Functions registered by name; ``throttle`` makes every invoke a 429, ``not_ready`` a 502."""

    def __init__(self) -> None:
        self.functions: dict[str, tuple[Handler, float]] = {}
        self.per_tenant: set[str] = set()
        self.invocations: list[Invocation] = []
        self.throttle = False
        self.not_ready = False
        super().__init__(
            Starlette(
                routes=[
                    Route(
                        "/2015-03-31/functions/{name}/invocations",
                        self._invoke,
                        methods=["POST"],
                    )
                ]
            ),
            name="fake-lambda",
        )

    def register(
        self, name: str, handler: Handler, *, timeout_s: float = 60.0, per_tenant: bool = False
    ) -> None:
        """per_tenant: as if created with TenancyConfig PER_TENANT (invokes need a TenantId)."""
        self.functions[name] = (handler, timeout_s)
        if per_tenant:
            self.per_tenant.add(name)
        else:
            self.per_tenant.discard(name)

    async def _invoke(self, request: Request) -> Response:
        name = request.path_params["name"]
        invocation_type = request.headers.get("x-amz-invocation-type", "RequestResponse")
        if self.throttle:
            return _service_error(
                429,
                "TooManyRequestsException",
                "Rate Exceeded.",
                Reason="ReservedFunctionConcurrentInvocationLimitExceeded",
            )
        if self.not_ready:
            return _service_error(
                502,
                "ResourceNotReadyException",
                "The function is inactive and its VPC connection is no longer available. "
                "Wait for the VPC connection to reestablish and try again.",
            )
        if name not in self.functions:
            arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
            return _service_error(404, "ResourceNotFoundException", f"Function not found: {arn}")
        tenant = request.headers.get(TENANT_HEADER)
        if (tenant is None) == (name in self.per_tenant):
            return _service_error(400, "InvalidParameterValueException", TENANT_MISMATCH)
        if tenant is not None and not TENANT_ID.fullmatch(tenant):
            return _service_error(
                400, "InvalidParameterValueException", f"Invalid tenant id: {tenant!r}"
            )
        try:
            event = json.loads(await request.body() or b"null")
        except ValueError:
            return _service_error(
                400,
                "InvalidRequestContentException",
                "Could not parse request body into json: Unrecognized token",
            )
        self.invocations.append(Invocation(name, invocation_type, event, tenant))
        handler, timeout_s = self.functions[name]
        context = FakeContext(name, timeout_s, tenant_id=tenant)
        headers = {"X-Amz-Executed-Version": "$LATEST", "x-amzn-RequestId": context.aws_request_id}
        try:
            async with asyncio.timeout(timeout_s):
                result = await asyncio.to_thread(handler, event, context)
        except TimeoutError:
            return JSONResponse(
                {
                    "errorType": "Sandbox.Timedout",
                    "errorMessage": f"RequestId: {context.aws_request_id} Error: "
                    f"Task timed out after {timeout_s:.2f} seconds",
                },
                headers={**headers, "X-Amz-Function-Error": "Unhandled"},
            )
        except SystemExit as exc:  # the runtime process exited: Lambda discards the environment
            return JSONResponse(
                {
                    "errorType": "Runtime.ExitError",
                    "errorMessage": f"RequestId: {context.aws_request_id} Error: "
                    f"Runtime exited with error: exit status {exc.code}",
                },
                headers={**headers, "X-Amz-Function-Error": "Unhandled"},
            )
        except Exception as exc:
            return JSONResponse(
                {
                    "errorMessage": str(exc),
                    "errorType": type(exc).__name__,
                    "requestId": context.aws_request_id,
                    "stackTrace": traceback.format_tb(exc.__traceback__),
                },
                headers={**headers, "X-Amz-Function-Error": "Unhandled"},
            )
        if invocation_type == "Event":
            return Response(status_code=202, headers=headers)
        return Response(json.dumps(result), media_type="application/json", headers=headers)
