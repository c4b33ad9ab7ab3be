"""The SQS worker: run each job of a batch, report failures per message, never run twice.

* Powertools ``BatchProcessor`` + ``process_partial_response``: a job that fails is a
  batch item failure (SQS redelivers only that message; after 3 receives the queue's
  redrive policy moves it to the dead-letter queue) while the others succeed. The
  redelivery continues from the job's last checkpoint.
* A job that meets its invocation's deadline (and whose limits allow another invocation)
  is suspended: its checkpoint says the next segment holds it, and the worker queues that
  segment's message on the same queue (``AGENTLOOP_RESEARCH_QUEUE_URL``) before this one is
  deleted. Without a queue (``make invoke``) the worker runs the continuation itself.
* Powertools idempotency on DynamoDB, keyed on exactly job id + execution id + segment: a
  redelivered message for an invocation that ended returns the stored outcome without
  calling the model; a failed one's record is removed when it raises, so the retry runs.
  The checkpoint's segment and its compare-and-swap writes drop whatever delivery the
  table does not (a message for an earlier segment runs nothing).
* Without ``AGENTLOOP_IDEMPOTENCY_TABLE`` (only allowed off Lambda, e.g. ``make invoke``)
  the worker runs every message it is given.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from agentloop.config import AgentConfig, ConfigurationError
from agentloop.limits import Deadline, LambdaContextLike
from agentloop.research.admission import charging_from_env
from agentloop.research.jobs import JobMessage
from agentloop.research.planner import QUEUE_URL_ENV, MessageSender, sender_from_env
from agentloop.research.runner import JobFailed, JobOutcome, JobRunner, JobTimeShare
from agentloop.research.store import ResultStore, store_from_env
from agentloop.tools.registry import ToolRegistry

logger = logging.getLogger(__name__)

IDEMPOTENCY_TABLE_ENV = "AGENTLOOP_IDEMPOTENCY_TABLE"
IDEMPOTENCY_KEY_PREFIX = "research-job"
IDEMPOTENCY_TTL_S = 2 * 24 * 3600
"""A finished job is remembered for two days: longer than SQS keeps a message (1 day here)
and than Lambda retries the planner, so every duplicate of a run arrives while it is known."""


class ResearchWorker:
    """Built once per container; ``handle`` is called once per SQS batch."""

    def __init__(
        self,
        runner: JobRunner,
        *,
        persistence: Any = None,
        expires_after_s: int = IDEMPOTENCY_TTL_S,
        sender: MessageSender | None = None,
    ) -> None:
        from aws_lambda_powertools.utilities.idempotency import (
            IdempotencyConfig,
            idempotent_function,
        )

        self.runner = runner
        self.sender = sender
        """Queues a suspended job's next invocation; None runs it here, one after another."""
        # One event loop for the container's life: model clients and their connection pools
        # are kept per loop, so a warm container reuses them from job to job.
        self._loop = asyncio.Runner()
        self.idempotency: Any = None
        self._process: Callable[..., dict[str, Any]] = self._run_message
        if persistence is not None:
            self.idempotency = IdempotencyConfig(
                event_key_jmespath="[job.id, execution_id, segment]",
                raise_on_no_idempotency_key=True,
                expires_after_seconds=expires_after_s,
            )
            self._process = idempotent_function(
                data_keyword_argument="message",
                persistence_store=persistence,
                config=self.idempotency,
                key_prefix=IDEMPOTENCY_KEY_PREFIX,
            )(self._run_message)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        tools: ToolRegistry | None = None,
        store: ResultStore | None = None,
    ) -> ResearchWorker:
        """As the template configures it: provider keys from the secret, S3, DynamoDB."""
        env = os.environ if environ is None else environ
        secret_id = env.get("AGENTLOOP_SECRET_ID")
        if secret_id:
            from agentloop.secret_store import load_provider_keys, read_secret

            names = load_provider_keys(read_secret(secret_id))
            logger.info("provider keys loaded from the secret", extra={"keys": names})
        if tools is None:
            from agentloop.defaults import default_registry

            tools = default_registry()
        owner, quota = charging_from_env(env)
        runner = JobRunner(
            store=store or store_from_env(env),
            config=AgentConfig.from_env(env),
            tools=tools,
            quota=quota,
            owner=owner,
        )
        table = env.get(IDEMPOTENCY_TABLE_ENV, "").strip()
        persistence = None
        if table:
            from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

            persistence = DynamoDBPersistenceLayer(table_name=table)
        elif env.get("AWS_LAMBDA_FUNCTION_NAME"):
            raise ConfigurationError(
                f"{IDEMPOTENCY_TABLE_ENV} is not set: on Lambda the worker needs the "
                "idempotency table, or a redelivered message would run (and spend) again"
            )
        else:
            logger.warning("%s is not set: running without idempotency", IDEMPOTENCY_TABLE_ENV)
        sender = sender_from_env(env) if env.get(QUEUE_URL_ENV, "").strip() else None
        if sender is None and env.get("AWS_LAMBDA_FUNCTION_NAME"):
            raise ConfigurationError(
                f"{QUEUE_URL_ENV} is not set: on Lambda the worker queues the next invocation "
                "of a job that meets its deadline there"
            )
        return cls(runner, persistence=persistence, sender=sender)

    def handle(self, event: dict[str, Any], lambda_context: Any = None) -> dict[str, Any]:
        """One SQS batch -> ``{"batchItemFailures": [...]}`` for the messages to retry."""
        from aws_lambda_powertools.utilities.batch import (
            BatchProcessor,
            EventType,
            process_partial_response,
        )
        from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

        if self.idempotency is not None and lambda_context is not None:
            # In-progress records then expire with this invocation, so a job cut off by the
            # function timeout can run again on redelivery.
            self.idempotency.register_lambda_context(lambda_context)
        share = JobTimeShare(_remaining(lambda_context), len(event.get("Records") or []))

        def record_handler(record: SQSRecord) -> dict[str, Any]:
            return self.handle_record(record.body, share.next_deadline(), _attempt(record))

        # A batch whose jobs all failed is answered the same way (every message listed), not
        # with an exception, so each failure is handled alike whatever the batch size.
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        response = process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=lambda_context
        )
        return dict(response)

    def handle_record(
        self, body: str, deadline: Deadline, attempt: int | None = None
    ) -> dict[str, Any]:
        """One message: validated, then run at most once per job id + execution id + segment."""
        message = JobMessage.model_validate_json(body)
        payload = message.model_dump(mode="json")
        return self._process(message=payload, deadline=deadline, attempt=attempt)

    def _run_message(
        self, message: dict[str, Any], deadline: Deadline, attempt: int | None = None
    ) -> dict[str, Any]:
        job = JobMessage.model_validate(message)
        outcome = self._loop.run(self.runner.run(job, deadline=deadline, attempt=attempt))
        _log(outcome)
        if outcome.status == "failed":
            raise JobFailed(outcome)
        if outcome.status == "suspended" and outcome.next_segment is not None:
            following = job.continued(outcome.next_segment)
            if self.sender is not None:
                # Sent before this message is deleted: if the send fails, this message
                # comes back, finds the hand-off in the checkpoint and sends it again.
                self.sender.send([following])
            else:  # no queue (make invoke): the next invocations run here, in turn
                return self._run_message(following.model_dump(mode="json"), Deadline(), None)
        return outcome.as_dict()

    def close(self) -> None:
        self._loop.close()


def _remaining(context: Any) -> LambdaContextLike | None:
    return context if callable(getattr(context, "get_remaining_time_in_millis", None)) else None


def _attempt(record: Any) -> int | None:
    try:
        return int(record.attributes.approximate_receive_count)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def _log(outcome: JobOutcome) -> None:
    fields = {k: v for k, v in outcome.as_dict().items() if k not in ("files",)}
    if outcome.status == "failed":
        logger.warning("research job failed", extra=fields)
    elif outcome.status == "incomplete":
        logger.warning("research job stopped at its %s limit", outcome.stop_reason, extra=fields)
    elif outcome.status == "suspended":
        logger.info("research job continues in invocation %s", outcome.next_segment, extra=fields)
    elif outcome.status == "skipped":
        logger.info("research job: a stale delivery ran nothing", extra=fields)
    else:
        logger.info("research job finished", extra=fields)
