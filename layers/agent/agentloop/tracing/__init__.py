"""OpenTelemetry GenAI spans of a request, built from its event stream (off by default).

An observer watches the top-level :func:`agentloop.chat.handle_chat` stream, which carries
every nested run's events too, so the loop itself knows nothing of tracing:

==========================  ===========================================================
event                       span
==========================  ===========================================================
(request starts)            ``invoke_agent agentloop`` (the top-level run) begins
``run_start``               the run's requested model and tools
``turn_start``              ``chat <model>`` begins under its run's span
``usage``                   ends it: response model, token usage, finish reason
``error`` in a turn         ends it with status ERROR and ``error.type`` (e.g. provider)
``tool_call_start``         ``execute_tool <name>`` begins under its run's span
``tool_call_result``        ends it (ERROR when the tool failed)
``subagent_start``          ``invoke_agent agentloop`` begins under its ``ask_llm`` call
``subagent_finish``         ends the sub-agent's span: stop reason, usage
``done``                    ends the top-level span; the spans are flushed
==========================  ===========================================================

Attributes follow the GenAI semantic conventions (``gen_ai.*``); every span also has
``agentloop.request_id``, ``agentloop.run_id``, ``agentloop.depth`` and, where the chat app
served it, ``agentloop.principal`` (the caller's id, never a token). Message content
(the request's messages, answers, tool arguments and results) is recorded only when the
operator asks for it: ``AGENTLOOP_TRACE_CONTENT=on`` or the standard
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

Tracing is on with ``AGENTLOOP_TRACING=on``; unset, it is on when an OTLP endpoint is
configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) unless
``OTEL_SDK_DISABLED=true``; ``AGENTLOOP_TRACING=off`` wins. When off, ``opentelemetry`` is
never imported. When on, spans go to the process's SDK tracer provider if one is set (the
AWS Distro for OpenTelemetry's wrapper sets one), else to a provider of our own exporting
over OTLP/HTTP to the endpoint in the standard ``OTEL_*`` variables.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from agentloop.models import Message
    from agentloop.tracing.spans import RunObserver

logger = logging.getLogger(__name__)

_ON = {"on", "true", "1", "yes"}
_OFF = {"off", "false", "0", "no"}


def tracing_enabled(env: Mapping[str, str] = os.environ) -> bool:
    """Whether requests are traced: see the module docstring for the rule."""
    chosen = env.get("AGENTLOOP_TRACING", "").strip().lower()
    if chosen in _ON:
        return True
    if chosen in _OFF or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def content_enabled(env: Mapping[str, str] = os.environ) -> bool:
    """Whether spans carry message content (off unless the operator turns it on)."""
    ours = env.get("AGENTLOOP_TRACE_CONTENT", "").strip().lower()
    standard = env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower()
    return ours in _ON or standard in _ON


_installed: tuple[TracerProvider, bool] | None = None


def install(provider: TracerProvider | None, *, content: bool = False) -> None:
    """Trace every request with ``provider`` (tests; an app with its own set-up), recording
    content if ``content``; ``None`` goes back to the environment's settings."""
    global _installed
    _installed = None if provider is None else (provider, content)


@functools.cache
def _from_env() -> tuple[TracerProvider, bool] | None:
    """The process's provider, made once (per Lambda container) when tracing is on."""
    if not tracing_enabled():
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    except ImportError:  # a deployment without the extra: runs go on, untraced
        logger.warning("tracing is on but OpenTelemetry is missing: pip install agentloop[tracing]")
        return None

    current = trace.get_tracer_provider()
    if isinstance(current, SdkTracerProvider):  # e.g. set up by ADOT's otel-instrument
        return current, content_enabled()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = SdkTracerProvider()  # its resource reads OTEL_SERVICE_NAME, _RESOURCE_ATTRIBUTES
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider, content_enabled()


def observer(messages: Sequence[Message], request_id: str | None, model: str) -> RunObserver | None:
    """An observer for one top-level request's events, or None when tracing is off."""
    setup = _installed or _from_env()
    if setup is None:
        return None
    from agentloop.tracing.spans import RunObserver  # the spans' code, only when tracing is on

    provider, content = setup
    return RunObserver(provider, messages, request_id, model, content=content)
