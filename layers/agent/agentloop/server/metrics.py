"""What a finished run leaves behind: one structured log line, its metrics (EMF, where they
are on) and the service's ``on_finish`` hooks; never message content."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

from agentloop.events import Done, Event, ToolCallStart
from agentloop.http_api import InvocationInfo
from agentloop.server.service import ChatService

logger = logging.getLogger("agentloop.chat_app")


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
