"""The chat function: a Starlette app that Lambda Web Adapter puts behind a Function URL.

The app's wiring and its route table. The HTTP side, which knows no protocol (body, auth,
host check, streaming, errors, the service), is ``agentloop.server``; each protocol face is
``agentloop.faces``, imported by its route at its first request. ``run.sh`` starts the app
with uvicorn on Lambda; ``make dev`` starts it locally.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Receive, Scope, Send

from agentloop.app_settings import AppSettings
from agentloop.events import Event
from agentloop.http_api import HttpError, validate_model
from agentloop.limits import CancelToken
from agentloop.logs import hide_query_strings
from agentloop.models import ChatRequest
from agentloop.server.app import lifespan, middleware
from agentloop.server.body import refuse_declared_oversize
from agentloop.server.errors import EXCEPTION_HANDLERS, with_error_policy
from agentloop.server.identity import authenticate
from agentloop.server.routes import Page, PageFiles, healthz, list_models, list_tools
from agentloop.server.runs import prepare_tools, read_request_json, start_run, stream_response
from agentloop.server.service import ChatService, service_from_env, service_of
from agentloop.server.streaming import cancel_on_disconnect
from agentloop.sse import event_frames

__all__ = ["ChatService", "create_app", "service_from_env"]

hide_query_strings()  # uvicorn's access log (on under `make dev`): no token from a query string

STATIC_DIR = Path(__file__).resolve().parent / "static"


async def chat(request: Request) -> Response:
    """``POST /chat``: the native protocol, an SSE stream of agent events."""
    service = service_of(request)
    raw, who = await read_request_json(request, service)
    run = start_run(request, service, who, validate_model(ChatRequest, raw))
    return stream_response(run, event_frames(run.events), service)


async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions``: the same agent behind OpenAI's protocol.

    Its errors follow the OpenAI face's retry policy (``openai_refusal`` in the route table).
    """
    # Imported here: only this route needs the OpenAI face, so start-up does not pay for it.
    from agentloop.faces.openai import CompletionRequest, CompletionStream, collect_completion

    service = service_of(request)
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

    service = service_of(request)
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

    service = service_of(request)
    raw, who = await read_request_json(request, service)
    run_input = validate_model(RunAgentInput, raw)
    chat_request = run_input.to_chat_request()
    run = start_run(request, service, who, chat_request, run_input.plan_params())
    stream = AgUiStream(run_input, run.context.cancel, chat_request.approvals)
    return stream_response(run, stream.frames(run.events), service)


async def responses(request: Request) -> Response:
    """``POST /v1/responses``: the text-conversation part of OpenAI's Responses API."""
    from agentloop.faces.responses import ResponsesRequest, ResponseStream, collect_response

    service = service_of(request)
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
        service = service_of(request)
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


def openai_refusal(error: HttpError) -> HttpError:
    """The OpenAI faces' retry policy for a refused request (``faces.openai.refusal``)."""
    from agentloop.faces.openai import refusal

    return refusal(error)


def routes() -> list[BaseRoute]:
    """The route table: the faces, the lists, the page."""
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/chat", chat, methods=["POST"]),
        Route(
            "/v1/chat/completions",
            with_error_policy(chat_completions, openai_refusal),
            methods=["POST"],
        ),
        Route("/v1/responses", with_error_policy(responses, openai_refusal), methods=["POST"]),
        Route("/api/chat", ui_message_stream, methods=["POST"]),
        Route("/ag-ui", ag_ui, methods=["POST"]),
        Route("/mcp", McpRoute(), methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/tools", list_tools, methods=["GET"]),
        Route("/", Page(STATIC_DIR / "index.html"), methods=["GET"]),
        Mount("/static", PageFiles(directory=STATIC_DIR), name="static"),
    ]


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
    app = Starlette(
        routes=routes(),
        middleware=middleware(settings, cors_origins),
        exception_handlers=dict(EXCEPTION_HANDLERS),
        lifespan=lifespan(settings),
    )
    app.state.service = service
    return app


def __getattr__(name: str) -> Starlette:
    """``chat_app:app`` (uvicorn's import string): the app from the environment, made at its
    first use rather than at import, so importing this module reads no environment."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = globals()["app"] = create_app()
    return app
