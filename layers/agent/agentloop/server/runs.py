"""The seam every face uses: read the request (who, the bounded JSON body, the message
limits), plan and start its run, and stream the face's frames of it back.

Who asked travels with the run: the :class:`~agentloop.principal.Principal` is in the run's
extras under ``PRINCIPAL_KEY`` (what owns or spends reads it there: tools get the extras,
sub-agents share them), its id is the sandbox tenant, and it is on the run's log lines and
trace (``PRINCIPAL_ID``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from agentloop.chat import ChatContext, handle_chat
from agentloop.events import Event
from agentloop.http_api import (
    HttpError,
    InvocationInfo,
    check_message_limits,
    invocation_info,
    plan_request,
    read_json,
)
from agentloop.logs import PRINCIPAL_ID, REQUEST_ID
from agentloop.models import ChatRequest
from agentloop.plan import RunPlan
from agentloop.principal import PRINCIPAL_KEY, Principal
from agentloop.sandbox.backends import SANDBOX_TENANT_KEY
from agentloop.server.body import read_body
from agentloop.server.identity import authenticate
from agentloop.server.metrics import observed
from agentloop.server.service import ChatService
from agentloop.server.streaming import STREAM_HEADERS, EventStreamResponse
from agentloop.sse import heartbeat

if TYPE_CHECKING:
    from agentloop.quota.runs import Held
    from agentloop.threads.runs import ThreadRun


logger = logging.getLogger(__name__)


@dataclass
class StartedRun:
    """A planned run whose events are ready to be translated by a face."""

    plan: RunPlan
    context: ChatContext
    info: InvocationInfo
    events: AsyncIterator[Event]
    held: Held | None = None
    """The run's reservation under the caller's limits (None: no limits apply);
    ``held.reservation.usage`` is each limit as this request left it."""

    def stream_headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**STREAM_HEADERS, "x-request-id": self.info.request_id, **(extra or {})}


async def read_request_json(
    request: Request, service: ChatService, messages_key: str = "messages"
) -> tuple[Any, Principal]:
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


async def start_run(
    request: Request,
    service: ChatService,
    who: Principal,
    chat_request: ChatRequest,
    params: Mapping[str, str] | None = None,
    *,
    can_ask: bool = True,
    client_thread_ids: bool = False,
    user_turns_seen: int | None = None,
) -> StartedRun:
    """Plan ``chat_request`` (422) and start its run; every face runs the agent this way.

    ``params`` names the request fields a plan refusal is about (``model``, ``tools``,
    ``response_format``) where the face's protocol carries them. A face that cannot ask a
    person for approval says so (``can_ask``): it is not offered the tools that need one.
    A face whose clients make their conversations' ids says so (``client_thread_ids``): a
    ``thread_id`` the caller has no thread of yet starts one, and one whose clients send
    their whole view says how many user turns it held (``user_turns_seen``: a thread with
    more is a 409; see ``threads.runs.open_thread``).

    The request's attachments go into the run's working directory (``_with_workspace``).
    With limits (``service.quota``) the run's maximum is reserved here, before any model
    call (429 over a limit, 503 if the store is down), and settled when its events end."""
    info = invocation_info(request.headers)
    context = _context(service, info, who)
    on_thread = None
    if chat_request.thread_id is not None:  # 404, 409 (busy) or 503 before anything is spent
        chat_request, on_thread = await _open_thread(
            request, who, chat_request, info, (client_thread_ids, user_turns_seen)
        )
        context.on_round = on_thread.save_round
    try:
        chat_request = await _with_workspace(request, who, chat_request, context, on_thread)
        plan, held = await _planned(service, who, chat_request, context, info, can_ask)
    except BaseException as exc:
        if on_thread is not None:
            await on_thread.abandon()
            await _undo_attachments(context)
        if isinstance(exc, HttpError) and params is not None and exc.param is not None:
            exc.param = params.get(exc.param, exc.param)
        raise
    REQUEST_ID.set(info.request_id)
    # Again here: a face may start the run in another task than the one that authenticated.
    PRINCIPAL_ID.set(who.id)
    if on_thread is not None:
        on_thread.keep_question()
    events = _kept(handle_chat(chat_request, context, plan), on_thread, held)
    return StartedRun(plan, context, info, observed(events, service, info), held)


def _kept(
    events: AsyncIterator[Event], on_thread: ThreadRun | None, held: Held | None
) -> AsyncIterator[Event]:
    """The run's events, its thread saved and then its reservation settled at its ``done``."""
    if on_thread is not None:  # saved before the quota's settling sees done
        from agentloop.threads.runs import saving

        events = saving(events, on_thread)
    if held is not None:
        from agentloop.quota.runs import settling

        events = settling(events, held)
    return events


async def _open_thread(
    request: Request,
    who: Principal,
    chat_request: ChatRequest,
    info: InvocationInfo,
    seen: tuple[bool, int | None],
) -> tuple[ChatRequest, ThreadRun]:
    """The request with its thread's messages first, and the run's claim on the thread."""
    from agentloop.server.threads import thread_http_error, thread_store
    from agentloop.store import StoreError
    from agentloop.threads import ThreadError
    from agentloop.threads.runs import open_thread

    threads = thread_store(request)
    try:
        client_ids, user_turns = seen
        return await open_thread(
            threads,
            who.id,
            chat_request,
            info.deadline.remaining(),
            client_ids=client_ids,
            user_turns_seen=user_turns,
        )
    except (ThreadError, StoreError) as exc:
        raise thread_http_error(exc) from exc


async def _with_workspace(
    request: Request,
    who: Principal,
    chat_request: ChatRequest,
    context: ChatContext,
    on_thread: ThreadRun | None,
) -> ChatRequest:
    """The run's working directory for execute_code (the thread's, if it is on one), with the
    request's attachments put in it and named to the model (413 if they do not fit, 503 if
    the file store is down)."""
    from agentloop.files.workspace import WORKSPACE_KEY, Workspace
    from agentloop.server.files import files_store

    thread_id = on_thread.thread_id if on_thread is not None else None
    workspace = Workspace(who.id, files_store(request), thread_id)
    context.extras[WORKSPACE_KEY] = workspace
    if not chat_request.attachments:
        return chat_request
    from agentloop.server.attachments import attach

    return await attach(workspace, chat_request, on_thread)


async def _undo_attachments(context: ChatContext) -> None:
    """A refused request's attachments out of its thread's workspace again (best effort: the
    refusal is what the caller hears)."""
    from agentloop.files.blobs import FilesUnavailable
    from agentloop.files.workspace import WORKSPACE_KEY, Workspace

    workspace = context.extras.get(WORKSPACE_KEY)
    if isinstance(workspace, Workspace):
        try:
            await workspace.undo_attach()
        except FilesUnavailable:
            logger.warning("a refused request's attachments stay in its thread's workspace")


async def _planned(
    service: ChatService,
    who: Principal,
    chat_request: ChatRequest,
    context: ChatContext,
    info: InvocationInfo,
    can_ask: bool,
) -> tuple[RunPlan, Held | None]:
    """The run's plan (a continuation checked with the caller's signer), within what the
    caller may still spend and reserved, when limits apply."""
    plan = plan_request(
        chat_request, service.config, service.tools, context.signer, can_ask=can_ask
    )
    if service.quota is None:
        return plan, None
    return await _reserve(service, who, plan, info)


async def _reserve(
    service: ChatService, who: Principal, plan: RunPlan, info: InvocationInfo
) -> tuple[RunPlan, Held | None]:
    """The plan within what ``who`` may still spend, and its reservation (quota.runs)."""
    from agentloop.quota.runs import reserve_run

    return await reserve_run(service.quota, who, plan, service.config, info.deadline)


def _context(service: ChatService, info: InvocationInfo, who: Principal) -> ChatContext:
    """The run's context: its deadline and request id, and who it is for (a per-principal
    sandbox tenant: two callers never share a sandbox environment)."""
    return ChatContext(
        setup=service.setup,
        deadline=info.deadline,
        request_id=info.request_id,
        extras={SANDBOX_TENANT_KEY: who.id, PRINCIPAL_KEY: who},
    )


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
