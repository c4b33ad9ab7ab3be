"""The chat function: a Starlette app that Lambda Web Adapter puts behind a Function URL.

Thin by design: read the HTTP request, authenticate, validate, hand the request to
``agentloop.chat.handle_chat`` and stream its events back. ``run.sh`` starts it with
uvicorn on Lambda; ``make dev`` starts it locally.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from agentloop.app_settings import REQUEST_ID, AppSettings, configure_logging
from agentloop.auth import AuthError, AuthMode, bearer_auth_from_env
from agentloop.chat import AgentSetup, ChatContext, handle_chat
from agentloop.config import AgentConfig, ConfigurationError
from agentloop.defaults import default_registry, mcp_tools_from_env
from agentloop.events import Done, Event, ToolCallStart
from agentloop.host_check import HostCheckMiddleware, describe_hosts
from agentloop.http_api import (
    HttpError,
    InvocationInfo,
    RequestLimits,
    check_message_limits,
    invocation_info,
    parse_json,
    plan_request,
    read_json,
    validate_model,
)
from agentloop.limits import CancelToken
from agentloop.llm.registry import describe_models, listed_models, providers_with_keys
from agentloop.logs import hide_query_strings
from agentloop.models import ChatRequest
from agentloop.plan import RunPlan
from agentloop.sandbox.backends import SANDBOX_TENANT_KEY
from agentloop.secret_store import load_provider_keys, read_secret
from agentloop.sse import event_frames, heartbeat
from agentloop.tools.execute_code import execute_code_mode
from agentloop.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentloop.mcp.client import McpTools

logger = logging.getLogger("agentloop.chat_app")
hide_query_strings()  # uvicorn's access log (on under `make dev`): no token from a query string

Authenticate = Callable[[str | None], str | None]
"""Checks an Authorization header; returns who it is (or None) or raises AuthError."""


@dataclass
class ChatService:
    """Everything a request handler needs; built once per process (per Lambda container)."""

    config: AgentConfig
    tools: ToolRegistry
    authenticate: Authenticate
    auth_mode: AuthMode
    limits: RequestLimits = field(default_factory=RequestLimits)
    heartbeat_s: float = 10.0
    execute_code: str = "not configured"
    """Where execute_code runs and how it is isolated, or why it is off (see /healthz)."""
    metrics_namespace: str | None = None
    """Where each run's EMF metrics go; None: none are written (AGENTLOOP_METRICS)."""
    on_finish: list[Callable[[Done, InvocationInfo], None]] = field(default_factory=list)
    mcp_tools: McpTools | None = None
    """The MCP servers whose tools join ``tools`` when first listed (AGENTLOOP_MCP_SERVERS)."""
    models: tuple[str, ...] = ()
    """What ``GET /v1/models`` offers, the default first, decided at start-up from the keys
    set (``registry.listed_models``); empty: the default model alone."""

    @functools.cached_property
    def setup(self) -> AgentSetup:
        """What every request's context shares (the same object for the life of the app)."""
        return AgentSetup(config=self.config, tools=self.tools)


def _allow_anyone(_: str | None) -> None:
    return None


def service_from_env(settings: AppSettings | None = None) -> ChatService:
    """The service as configured by ``AGENTLOOP_*`` variables (and the secret, in AWS)."""
    settings = settings or AppSettings.from_env()
    secret: dict[str, Any] = {}
    if settings.secret_id:
        secret = read_secret(settings.secret_id)
        names = load_provider_keys(secret)
        logger.info("provider keys loaded from the secret", extra={"keys": names})
    if settings.metrics:
        # Import now, in Lambda's init phase, not while the first request's done is pending.
        import aws_lambda_powertools.metrics  # noqa: F401
    mode = settings.auth_mode
    authenticate: Authenticate = _allow_anyone
    if mode == "bearer":
        authenticate = bearer_auth_from_env(settings.auth_environ()).check
    elif mode == "none":
        logger.warning("AGENTLOOP_AUTH_MODE=none: anyone who can reach this URL can use it")
    tools = default_registry()
    mcp_tools = mcp_tools_from_env(tools, secret)
    execute_code = execute_code_mode() if "execute_code" in tools.names else "off"
    logger.info("execute_code: %s", execute_code)
    config = AgentConfig.from_env()  # after the secret's keys: they choose the default model
    logger.log(*describe_models(config.default_model))
    return ChatService(
        config=config,
        tools=tools,
        authenticate=authenticate,
        auth_mode=mode,
        limits=settings.limits,
        execute_code=execute_code,
        metrics_namespace=settings.metrics_namespace if settings.metrics else None,
        mcp_tools=mcp_tools,
        models=tuple(
            listed_models(config.default_model, config.allowed_models, providers_with_keys())
        ),
    )


# -- responses ------------------------------------------------------------------------------


def error_response(error: HttpError) -> JSONResponse:
    if isinstance(error, BodyRefused) and error.linger is not None:
        return LingeringResponse(error, error.linger)
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


class LingeringResponse(JSONResponse):
    """An error answer sent while the client is still sending its body (a lingering close).

    The whole answer goes out at once; the rest of the body is then read and thrown away
    (:func:`discard_body`) before the response ends and uvicorn closes the connection.
    Closing on a client that is still sending resets the connection, and a client that
    sends everything before it reads (urllib, fetch) never sees the answer. The answer's
    last, empty piece is held back meanwhile: once a response is complete uvicorn stops
    reading the request (``receive()`` says ``http.disconnect``).
    """

    def __init__(self, error: HttpError, limits: RequestLimits) -> None:
        super().__init__(error.body(), status_code=error.status, headers=error.headers)
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send({"type": "http.response.body", "body": self.body, "more_body": True})
        await discard_body(receive, self.limits)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def discard_body(receive: Receive, limits: RequestLimits) -> None:
    """Read and drop the rest of a request body until it ends or the client leaves, within
    ``limits.linger_s`` in all, ``linger_idle_s`` between pieces and ``max_discard_bytes``."""
    size = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limits.linger_s):
            while size <= limits.max_discard_bytes:
                async with asyncio.timeout(limits.linger_idle_s):
                    message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
                size += len(message.get("body", b""))


class EventStreamResponse(Response):
    """Streams frames and notices the client leaving, which cancels the run.

    On a disconnect the run is told to stop (it finishes the tool round in progress)
    and the remaining frames are drained unsent, so the run still ends with ``done``
    and is logged and measured like any other.
    """

    media_type = "text/event-stream"

    def __init__(
        self, frames: AsyncIterator[bytes], cancel: CancelToken, headers: dict[str, str]
    ) -> None:
        # Like StreamingResponse: no body, hence no content-length; uvicorn sends it chunked.
        self.status_code = 200
        self.background = None
        self.init_headers(headers)
        self.frames = frames
        self.cancel = cancel

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = False

        async def watch_disconnect() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            self.cancel.cancel()

        watcher = asyncio.create_task(watch_disconnect())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for frame in self.frames:
                if gone:
                    continue
                try:
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                except OSError:
                    gone = True
                    self.cancel.cancel()
            if not gone:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


_STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


# -- request handling -----------------------------------------------------------------------


async def read_body(request: Request, limits: RequestLimits) -> bytes:
    """The body, refusing to buffer more than the limit (413) or to wait for it forever (408).

    A body over the limit is refused as soon as that is known, from its declared length or
    the bytes so far; the rest of it is read and thrown away after the answer is out
    (:class:`LingeringResponse`), so a client that sends everything before it reads still
    reads the 413. Read with ``receive`` itself, as only it says whether more is coming.
    """
    refuse_declared_oversize(request, limits)
    chunks: list[bytes] = []
    size = 0
    more = True
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            while more:
                message = await request.receive()
                if message["type"] != "http.request":
                    raise HttpError(400, "client_disconnected", "the client went away")
                chunk: bytes = message.get("body", b"")
                more = message.get("more_body", False)
                size += len(chunk)
                if size > limits.max_body_bytes:
                    raise BodyRefused(_too_large_message(limits, None), limits if more else None)
                chunks.append(chunk)
    except TimeoutError as exc:
        raise HttpError(
            408,
            "request_timeout",
            f"the request body did not arrive within {limits.body_timeout_s:g} s",
            headers=_CLOSE,
        ) from exc
    return b"".join(chunks)


def refuse_declared_oversize(request: Request, limits: RequestLimits) -> None:
    """413 at once for a body whose ``Content-Length`` is over the limit."""
    declared = _declared_length(request.headers.get("content-length"))
    if declared is not None and declared > limits.max_body_bytes:
        # A client that waits for "100 Continue" sends nothing more: nothing to linger for.
        waits = request.headers.get("expect", "").lower() == "100-continue"
        coming = not waits and declared <= limits.max_discard_bytes
        raise BodyRefused(_too_large_message(limits, declared), limits if coming else None)


def _declared_length(value: str | None) -> int | None:
    """Content-Length as a number, if it is one (ASCII digits; absurd lengths stay absurd)."""
    if not value or not value.isascii() or not value.isdigit():
        return None
    return int(value) if len(value) <= 18 else 10**18


def _too_large_message(limits: RequestLimits, declared: int | None) -> str:
    if declared is not None:
        return f"request body is {declared} bytes; the limit is {limits.max_body_bytes}"
    return f"request body exceeds the limit of {limits.max_body_bytes} bytes"


class BodyRefused(HttpError):
    """A 413 given before the body was all read; ``linger``: the bounds within which the
    rest of it is read after the answer, None when none is coming or too much would be."""

    def __init__(self, message: str, linger: RequestLimits | None) -> None:
        super().__init__(413, "request_too_large", message, headers=_CLOSE)
        self.linger = linger


_CLOSE = {"connection": "close"}
"""On an answer given before the body was all read: uvicorn would otherwise keep the
connection open (for a stalled client, until its keep-alive timeout after every byte)."""


def authenticate(service: ChatService, request: Request) -> str | None:
    try:
        return service.authenticate(request.headers.get("authorization"))
    except AuthError as exc:
        raise HttpError(exc.status, "unauthorized", exc.message, headers=exc.headers) from exc
    except ConfigurationError as exc:  # the token store itself could not be read
        logger.error("authentication unavailable: %s", exc)
        raise HttpError(503, "configuration_error", "authentication is unavailable") from exc


def caller_id(service: ChatService, who: str | None, request: Request) -> str:
    """The authenticated caller as a short non-secret id: execute_code's sandbox tenant.

    bearer: the matching token's id; iam: the signer's ARN from the Function URL's request
    context; none: one shared "anonymous" (docs/deploy.md, "Tenant isolation").
    """
    if service.auth_mode == "bearer" and who:
        return f"bearer:{who}"
    if service.auth_mode == "iam":
        return f"iam:{_iam_caller(request) or 'unknown'}"
    return "anonymous"


def _iam_caller(request: Request) -> str | None:
    """``requestContext.authorizer.iam.userArn`` as Lambda Web Adapter forwards it.

    The adapter's value is the last ``x-amzn-request-context`` (older adapters append theirs
    after one a caller may have sent; newer ones replace it), so the last one is read.
    """
    values = request.headers.getlist("x-amzn-request-context")
    try:  # bounded like a body: locally a client can send this header
        context = (
            parse_json(values[-1].encode("latin-1", "replace"), RequestLimits()) if values else None
        )
    except HttpError:
        return None
    authorizer = context.get("authorizer") if isinstance(context, dict) else None
    iam = authorizer.get("iam") if isinstance(authorizer, dict) else None
    arn = iam.get("userArn") if isinstance(iam, dict) else None
    return arn if isinstance(arn, str) and arn else None


def _context(service: ChatService, info: InvocationInfo, caller: str) -> ChatContext:
    return ChatContext(
        setup=service.setup,
        deadline=info.deadline,
        request_id=info.request_id,
        extras={SANDBOX_TENANT_KEY: caller},
    )


async def observed(
    events: AsyncIterator[Event], service: ChatService, info: InvocationInfo
) -> AsyncIterator[Event]:
    """Pass events through; when the run ends, log it and record its metrics."""
    started = time.perf_counter()
    tool_calls = 0
    async for event in events:
        if isinstance(event, ToolCallStart):
            tool_calls += 1
        if isinstance(event, Done) and event.depth == 0:
            seconds = time.perf_counter() - started
            record_run(event, info, tool_calls, seconds, service.metrics_namespace)
            for hook in service.on_finish:
                hook(event, info)
        yield event


def record_run(
    done: Done, info: InvocationInfo, tool_calls: int, seconds: float, namespace: str | None
) -> None:
    """One structured log line and (``namespace`` set) one EMF metrics blob per request; no
    message content. Powertools prints the blob on stdout, where Lambda ships it to CloudWatch."""
    logger.info(
        "run finished",
        extra={
            "request_id": info.request_id,
            "run_id": done.run_id,
            "stop_reason": done.stop_reason,
            "iterations": done.iterations,
            "tool_calls": tool_calls,
            "prompt_tokens": done.usage.prompt_tokens,
            "completion_tokens": done.usage.completion_tokens,
            "latency_ms": round(seconds * 1000),
        },
    )
    if namespace is None:
        return
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

    metrics = EphemeralMetrics(namespace=namespace)
    metrics.add_dimension(name="stop_reason", value=done.stop_reason)
    metrics.add_metric(name="Iterations", unit=MetricUnit.Count, value=done.iterations)
    metrics.add_metric(name="ToolCalls", unit=MetricUnit.Count, value=tool_calls)
    metrics.add_metric(name="PromptTokens", unit=MetricUnit.Count, value=done.usage.prompt_tokens)
    metrics.add_metric(
        name="CompletionTokens", unit=MetricUnit.Count, value=done.usage.completion_tokens
    )
    metrics.add_metric(name="Latency", unit=MetricUnit.Milliseconds, value=seconds * 1000)
    metrics.flush_metrics()


def _service(request: Request) -> ChatService:
    service: ChatService = request.app.state.service
    return service


@dataclass
class StartedRun:
    """A planned run whose events are ready to be translated by a face."""

    plan: RunPlan
    context: ChatContext
    info: InvocationInfo
    events: AsyncIterator[Event]

    def stream_headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**_STREAM_HEADERS, "x-request-id": self.info.request_id, **(extra or {})}


async def read_request_json(
    request: Request, service: ChatService, messages_key: str = "messages"
) -> tuple[Any, str | None]:
    """Every face's first steps: who is asking (401), the bounded body (408, 413) as JSON
    (400), and the message limits on ``raw[messages_key]`` (413)."""
    who = authenticate(service, request)
    await prepare_tools(service)
    body = await read_body(request, service.limits)
    raw = read_json(body, request.headers.get("content-type"), service.limits)
    check_message_limits(raw, service.limits, messages_key)
    return raw, who


async def prepare_tools(service: ChatService) -> None:
    """Before a request is planned: the MCP servers' tool lists, fetched at first use (a few
    seconds at most; a server down then has no tools yet and is tried again later)."""
    if service.mcp_tools is not None:
        await service.mcp_tools.ensure_loaded()


async def list_tools(request: Request) -> Response:
    """``GET /tools``: the tools a request may name (the chat page's settings list them)."""
    service = _service(request)
    authenticate(service, request)
    await prepare_tools(service)
    tools = [{"name": t.name, "opt_in": t.opt_in} for t in service.tools]
    mcp = service.mcp_tools.describe() if service.mcp_tools is not None else []
    return JSONResponse({"tools": tools, "mcp_servers": mcp})


def start_run(
    request: Request,
    service: ChatService,
    who: str | None,
    chat_request: ChatRequest,
    params: Mapping[str, str] | None = None,
    *,
    can_ask: bool = True,
) -> StartedRun:
    """Plan ``chat_request`` (422) and start its run; every face runs the agent this way.

    ``params`` names the request fields a plan refusal is about (``model``, ``tools``,
    ``response_format``) where the face's protocol carries them. A face that cannot ask a
    person for approval says so (``can_ask``): it is not offered the tools that need one."""
    try:
        plan = plan_request(
            chat_request, service.config, service.tools, service.setup.signer, can_ask=can_ask
        )
    except HttpError as exc:
        if params is not None and exc.param in params:
            exc.param = params[exc.param]
        raise
    info = invocation_info(request.headers)
    REQUEST_ID.set(info.request_id)
    context = _context(service, info, caller_id(service, who, request))
    events = observed(handle_chat(chat_request, context, plan), service, info)
    return StartedRun(plan, context, info, events)


def stream_response(
    run: StartedRun,
    frames: AsyncIterator[bytes],
    service: ChatService,
    headers: dict[str, str] | None = None,
) -> EventStreamResponse:
    """A face's frames as a streamed answer: heartbeats, disconnect cancels the run."""
    return EventStreamResponse(
        heartbeat(frames, service.heartbeat_s), run.context.cancel, run.stream_headers(headers)
    )


async def chat(request: Request) -> Response:
    """``POST /chat``: the native protocol, an SSE stream of agent events."""
    service = _service(request)
    raw, who = await read_request_json(request, service)
    run = start_run(request, service, who, validate_model(ChatRequest, raw))
    return stream_response(run, event_frames(run.events), service)


T = TypeVar("T")


async def cancel_on_disconnect(receive: Receive, cancel: CancelToken, work: Awaitable[T]) -> T:
    """Await ``work``; a client that leaves meanwhile cancels the run, as a stream's does.

    A non-streamed client sends nothing until its answer, so only ``http.disconnect`` can
    tell that it left; without this the run would go on to its limits for no one.
    """

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        cancel.cancel()

    watcher = asyncio.create_task(watch())
    try:
        return await work
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions``: the same agent behind OpenAI's protocol.

    Its errors follow the OpenAI face's retry policy (see :func:`http_error`).
    """
    # Imported here: only this route needs the OpenAI face, so start-up does not pay for it.
    from agentloop.faces.openai import CompletionRequest, CompletionStream, collect_completion

    service = _service(request)
    raw, who = await read_request_json(request, service)
    completion = validate_model(CompletionRequest, raw)
    chat_request = completion.to_chat_request()
    run = start_run(request, service, who, chat_request, completion.plan_params(), can_ask=False)
    completion_id = f"chatcmpl-{run.info.request_id}"
    if not completion.stream:
        body_json = await cancel_on_disconnect(
            request.receive,
            run.context.cancel,
            collect_completion(completion, run.events, completion_id, run.plan.model),
        )
        return JSONResponse(body_json)
    stream = CompletionStream(completion, completion_id, run.plan.model, run.context.cancel)
    return stream_response(run, stream.frames(run.events), service)


async def ui_message_stream(request: Request) -> Response:
    """``POST /api/chat``: the AI SDK's UI message stream, for ``useChat``'s default transport."""
    from agentloop.faces.ui_stream import UI_STREAM_HEADERS, UIChatRequest, UIMessageStream

    service = _service(request)
    raw, who = await read_request_json(request, service)
    ui_request = validate_model(UIChatRequest, raw)
    chat_request = ui_request.to_chat_request()
    run = start_run(request, service, who, chat_request, ui_request.plan_params())
    stream = UIMessageStream(
        ui_request, run.info.request_id, run.context.cancel, chat_request.approvals
    )
    return stream_response(run, stream.frames(run.events), service, UI_STREAM_HEADERS)


async def ag_ui(request: Request) -> Response:
    """``POST /ag-ui``: the agent as an AG-UI agent (``RunAgentInput`` in, AG-UI events out)."""
    from agentloop.faces.ag_ui import AgUiStream, RunAgentInput

    service = _service(request)
    raw, who = await read_request_json(request, service)
    run_input = validate_model(RunAgentInput, raw)
    chat_request = run_input.to_chat_request()
    run = start_run(request, service, who, chat_request, run_input.plan_params())
    stream = AgUiStream(run_input, run.context.cancel, chat_request.approvals)
    return stream_response(run, stream.frames(run.events), service)


async def responses(request: Request) -> Response:
    """``POST /v1/responses``: the text-conversation part of OpenAI's Responses API."""
    from agentloop.faces.responses import ResponsesRequest, ResponseStream, collect_response

    service = _service(request)
    raw, who = await read_request_json(request, service, messages_key="input")
    responses_request = validate_model(ResponsesRequest, raw)
    run = start_run(
        request,
        service,
        who,
        responses_request.to_chat_request(),
        responses_request.plan_params(),
        can_ask=False,
    )
    response_id = f"resp_{run.info.request_id}"
    if not responses_request.stream:
        body_json = await cancel_on_disconnect(
            request.receive,
            run.context.cancel,
            collect_response(responses_request, run.events, response_id, run.plan.model),
        )
        return JSONResponse(body_json)
    stream = ResponseStream(responses_request, response_id, run.plan.model, run.context.cancel)
    return stream_response(run, stream.frames(run.events), service)


class McpRoute:
    """``POST /mcp``: the agent as an MCP server's ``ask`` tool (``agentloop.faces.mcp``).

    An ASGI endpoint, since the MCP SDK writes the response itself; the SDK is imported at
    the first request, so start-up does not pay for it.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        service = _service(request)
        who = authenticate(service, request)
        refuse_declared_oversize(request, service.limits)  # the SDK's 413 would reset urllib
        await prepare_tools(service)  # `ask` may name the MCP servers' tools too
        from agentloop.faces.mcp import PLAN_PARAMS, McpEndpoint, Seat, ToolChoice

        def start(chat_request: ChatRequest) -> tuple[AsyncIterator[Event], CancelToken]:
            run = start_run(request, service, who, chat_request, PLAN_PARAMS, can_ask=False)
            return run.events, run.context.cancel

        state = request.app.state
        if getattr(state, "mcp", None) is None:
            state.mcp = McpEndpoint(service.limits.max_body_bytes)
        tools = ToolChoice.of(service.tools, service.config)  # `ask`'s schema lists them
        await state.mcp.handle(scope, receive, send, Seat(start, tools))


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: what OpenAI-style chat UIs offer in their model picker: the default,
    then the allowed models whose provider has a key."""
    service = _service(request)
    authenticate(service, request)
    names = service.models or (service.config.default_model,)
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": name.split(":", 1)[0]}
        for name in names
    ]
    return JSONResponse({"object": "list", "data": data})


async def healthz(request: Request) -> Response:
    """Readiness for Lambda Web Adapter, and which sandbox mode ``execute_code`` is in."""
    return JSONResponse({"status": "ok", "execute_code": _service(request).execute_code})


STATIC_DIR = Path(__file__).resolve().parent / "static"

# The page runs only its own script and styles; connect-src stays open because the endpoint
# setting may point at another origin (a deployed Function URL).
_PAGE_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src *; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cache-control": "no-cache",
}


async def index(request: Request) -> Response:
    """``GET /``: the reference chat page (static; it asks for the token itself)."""
    return FileResponse(STATIC_DIR / "index.html", headers=_PAGE_HEADERS)


async def http_error(request: Request, exc: Exception) -> Response:
    """Every route's HttpError, in the one error shape, with the error's own headers.

    Errors from ``/v1/chat/completions`` and ``/v1/responses`` also follow the OpenAI face's
    retry policy (``faces.openai.refusal``: ``x-should-retry: false`` where a retry cannot help);
    the run's
    own errors carry their policy already, and ``refusal`` leaves them as they are.
    """
    if not isinstance(exc, HttpError):  # registered for HttpError only
        raise exc
    if request.scope.get("endpoint") in (chat_completions, responses):
        from agentloop.faces.openai import refusal

        exc = refusal(exc)
    return error_response(exc)


async def not_found(request: Request, exc: Exception) -> Response:
    return error_response(HttpError(404, "not_found", f"no route for {request.url.path}"))


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(
        HttpError(405, "method_not_allowed", f"{request.method} is not allowed here")
    )


async def internal_error(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error", extra={"path": request.url.path})
    return error_response(HttpError(500, "internal_error", "internal error"))


def create_app(
    service: ChatService | None = None,
    *,
    cors_origins: Sequence[str] | None = None,
    settings: AppSettings | None = None,
) -> Starlette:
    """The ASGI app; with no ``service``, one is built from the environment at start-up.

    The environment is read once, here (``settings``, unless given); a bad value raises
    ConfigurationError naming the variable.
    """
    settings = settings or AppSettings.from_env()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if getattr(app.state, "service", None) is None:
            configure_logging(settings)
            try:
                app.state.service = service_from_env(settings)
            except ConfigurationError as exc:
                logger.error("configuration error: %s", exc)
                raise
        logger.info(describe_hosts(allowed_hosts))
        yield
        if app.state.service.mcp_tools is not None:  # end the MCP sessions (DELETE)
            await app.state.service.mcp_tools.close()
        if getattr(app.state, "mcp", None) is not None:  # started by the first /mcp request
            await app.state.mcp.close()

    origins = settings.cors_origins if cors_origins is None else cors_origins
    allowed_hosts = settings.host_check()  # off on Lambda unless AGENTLOOP_ALLOWED_HOSTS is set
    middleware = []
    if allowed_hosts is not None:  # first, so a refused request reaches nothing else
        middleware.append(Middleware(HostCheckMiddleware, allowed=allowed_hosts))
    if origins:  # on AWS the Function URL answers CORS itself; this is for local servers
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(origins),
                allow_methods=["GET", "POST"],
                # mcp-protocol-version: browser MCP clients on another origin (POST /mcp)
                allow_headers=["authorization", "content-type", "mcp-protocol-version"],
            )
        )
    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/chat", chat, methods=["POST"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/api/chat", ui_message_stream, methods=["POST"]),
            Route("/ag-ui", ag_ui, methods=["POST"]),
            Route("/mcp", McpRoute(), methods=["POST"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/tools", list_tools, methods=["GET"]),
            Route("/", index, methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ],
        middleware=middleware,
        exception_handlers={
            HttpError: http_error,
            404: not_found,
            405: method_not_allowed,
            500: internal_error,
        },
        lifespan=lifespan,
    )
    app.state.service = service
    return app


app = create_app()
