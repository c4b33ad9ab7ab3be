"""Scheduled research jobs: job specs, the planner, the SQS worker, the local runner.

EventBridge Scheduler -> planner (``planner.plan``) -> one SQS message per job ->
worker (``worker.ResearchWorker``) -> ``runner.JobRunner`` -> reports in the results
store (``store``). ``python -m agentloop.research`` runs the same jobs locally.
Submodules import what they need lazily; importing this package is cheap.
"""

from agentloop.research.jobs import (
    JobLimits,
    JobMessage,
    JobOutput,
    JobsInputError,
    JobSpec,
    ParsedJobs,
    Rejection,
    ScheduleInput,
    parse_jobs,
    parse_jobs_text,
)

__all__ = [
    "JobLimits",
    "JobMessage",
    "JobOutput",
    "JobSpec",
    "JobsInputError",
    "ParsedJobs",
    "Rejection",
    "ScheduleInput",
    "parse_jobs",
    "parse_jobs_text",
]
