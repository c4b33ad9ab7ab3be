"""The research functions' AWS as the tests build it on moto: the bucket, the job queue and
the idempotency table (``aws``, a fixture in ``tests/integration/conftest.py``), and what a
test reads back from them."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from agentloop.research.worker import IDEMPOTENCY_KEY_PREFIX

BUCKET = "agentloop-results-test"
TABLE = "agentloop-idempotency-test"
SCHEDULED = "2025-06-02T06:00:00Z"


@dataclass
class FakeContext:
    """The parts of the Lambda context the handlers and Powertools read."""

    function_name: str = "agentloop-research"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:agentloop-research"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    remaining_ms: int = 120_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass
class Aws:
    s3: Any
    sqs: Any
    dynamodb: Any
    queue_url: str
    queue_arn: str

    def read(self, key: str) -> str:
        body: bytes = self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return body.decode()

    def stored(self) -> list[str]:
        listing = self.s3.list_objects_v2(Bucket=BUCKET, Prefix="research/")
        return sorted(obj["Key"] for obj in listing.get("Contents", []))

    def drain(self) -> list[dict[str, Any]]:
        """Every message on the queue, as SQS records of a Lambda event."""
        records: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                return records
            records += [self.record(m) for m in got]

    def record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": {},
            "md5OfBody": message["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": "us-east-1",
        }


def idempotency_key(job_id: str, execution_id: str, segment: int = 0) -> str:
    """Powertools' key: the prefix and the MD5 of exactly these three values' JSON."""
    digest = hashlib.md5(
        json.dumps([job_id, execution_id, segment], sort_keys=True).encode()
    ).hexdigest()
    return f"{IDEMPOTENCY_KEY_PREFIX}#{digest}"


def redeliver(aws: Aws, record: dict[str, Any]) -> dict[str, Any]:
    """SQS delivering a batch item failure again (at once, instead of after 90 minutes)."""
    aws.sqs.change_message_visibility(
        QueueUrl=aws.queue_url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0
    )
    [again] = aws.drain()
    assert again["messageId"] == record["messageId"]
    return again
