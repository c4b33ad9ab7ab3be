"""A job's invocation under its owner's limits: planned, then reserved as a chat request is.

The reservation is the server's own (``agentloop.quota.runs.reserve_run``): before the first
model call the invocation reserves its maximum against its owner's allowance (what earlier
invocations spent is carried in, as a continued run's is), its plan is clamped to that, and
the reservation is settled at the run's ``done``. What the owner's limits refuse:

- the money or tokens are used up (``usd_per_day``, ``usd_per_month``, ``tokens_per_day``):
  the job is not failed (a retry could not pass before the limit resets) but ends at once,
  without a model call, with stop reason ``quota`` and a report of what it had gathered;
- too many runs in flight or requests this minute (``concurrent_runs``,
  ``requests_per_minute``), a store that cannot be reached, or a dollar limit on an unpriced
  model: :class:`NotAdmitted`, and the invocation fails (SQS delivers it again later; after
  the queue's receives it goes to the dead-letter queue). It never runs unlimited.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentloop.chat import ChatContext
from agentloop.config import ConfigurationError
from agentloop.models import ChatRequest, RunProgress
from agentloop.plan import PlanError, RunPlan, plan_run
from agentloop.research.owner import default_owner, owner_principal

if TYPE_CHECKING:
    from agentloop.quota import Quota
    from agentloop.quota.runs import Held
    from agentloop.research.runner import JobRunner

logger = logging.getLogger(__name__)

SPENT_LIMITS = frozenset({"usd_per_day", "usd_per_month", "tokens_per_day"})


class NotAdmitted(Exception):
    """The invocation may not run now, and failing it (to be delivered again) is right."""


async def admit(
    runner: JobRunner, owner_id: str, request: ChatRequest, context: ChatContext
) -> tuple[RunPlan | None, Held | None]:
    """The plan to run and its reservation (None: no limits). A plan refused is None: the
    chat handler refuses it again, as an error the report records, so a job fails the same
    way with limits as without. NotAdmitted when the owner's limits refuse it for now."""
    try:
        plan = plan_run(request, runner.config, runner.tools, can_ask=False)
    except (PlanError, ConfigurationError):
        return None, None
    if runner.quota is None:
        return plan, None
    from agentloop.http_api import HttpError
    from agentloop.quota.runs import QuotaRefused, reserve_run

    who = owner_principal(owner_id)
    try:
        return await reserve_run(
            runner.quota, who, plan, runner.config, context.deadline, context.progress
        )
    except QuotaRefused as exc:
        if exc.exceeded.param not in SPENT_LIMITS:
            raise NotAdmitted(f"the owner {who.id}'s limits refused the run: {exc}") from exc
        logger.warning("research job: the allowance of %s is used up: %s", who.id, exc)
        return spent_plan(plan, context.progress), None
    except HttpError as exc:
        raise NotAdmitted(
            f"the owner {who.id}'s limits could not be checked ({exc.status}): {exc.message}"
        ) from exc


def spent_plan(plan: RunPlan, progress: RunProgress | None) -> RunPlan:
    """``plan`` with nothing left to spend, its budget the quota's: the loop ends it at once
    with stop reason ``quota`` and a summary of what was gathered, making no model call."""
    carried = sum(u.total_tokens for u in progress.usage_by_depth) if progress else 0
    return dataclasses.replace(
        plan, token_budget=max(1, carried), quota_caps=plan.quota_caps | {"tokens"}
    )


def charging_from_env(environ: Mapping[str, str]) -> tuple[str, Quota | None]:
    """The owner of jobs that name none, and the quota (``AGENTLOOP_LIMITS`` on
    ``AGENTLOOP_STORE``'s store, the server's; None: no limits). ConfigurationError when
    either is wrong: a worker that cannot keep the limits does not start."""
    from agentloop.quota import quota_from_env

    return default_owner(environ), quota_from_env(environ)
