"""The research functions: the scheduled planner and the SQS worker.

Thin by design: the logic is in ``agentloop.research``. ``schedule_handler`` is the
EventBridge Scheduler target (its event is the schedule's JSON input, into which the
template puts the scheduler's execution id and scheduled time); ``worker_handler`` is fed
by the jobs queue and answers with partial batch failures.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

from agentloop.logs import quiet_request_loggers
from agentloop.research.jobs import JobCheck
from agentloop.research.planner import plan, plan_check, sender_from_env
from agentloop.research.worker import ResearchWorker

if TYPE_CHECKING:
    from agentloop.tools.registry import ToolRegistry

_ON_LAMBDA = bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))
# Off Lambda (make invoke, tests) logs go to stderr, leaving stdout to the result.
logger = Logger(
    service=os.environ.get("POWERTOOLS_SERVICE_NAME", "agentloop-research"),
    stream=None if _ON_LAMBDA else sys.stderr,
)
if _ON_LAMBDA:  # the library's loggers write JSON through the same handler
    copy_config_to_registered_loggers(source_logger=logger, include={"agentloop"})
    quiet_request_loggers()  # request URLs can carry the prompt


@functools.cache
def registry() -> ToolRegistry:
    """The worker's default registry, built once for both checks below."""
    from agentloop.defaults import default_registry

    return default_registry()


@functools.cache
def known_tools() -> tuple[str, ...]:
    """The tool names a job may ask for: the worker's default registry."""
    return tuple(registry().names)


@functools.cache
def job_check() -> JobCheck:
    """Each job planned as the worker will (its settings and registry), so what it would
    refuse - an unpriced model with a dollar limit, say - is rejected now."""
    from agentloop.config import AgentConfig

    return plan_check(AgentConfig.from_env(), registry())


@functools.cache
def worker() -> ResearchWorker:
    """Built on the first batch and kept for the container's life (clients, event loop)."""
    return ResearchWorker.from_env()


@logger.inject_lambda_context
def schedule_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Schedule input -> one queued message per valid job; returns what was queued/rejected."""
    summary = plan(
        event,
        sender=sender_from_env(os.environ),
        known_tools=known_tools(),
        check=job_check(),
        fallback_execution_id=f"manual-{context.aws_request_id}",
    )
    return summary.as_dict()


@logger.inject_lambda_context
def worker_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """SQS batch -> ``{"batchItemFailures": [...]}`` (the failed jobs' message ids)."""
    return worker().handle(event, context)
