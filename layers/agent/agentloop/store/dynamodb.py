"""The deployed backend: one DynamoDB table (``dynamodb_items`` has its layout).

boto3 is imported when the first call is made, never with ``agentloop.store``. Every call is
one DynamoDB request (``transact``: one TransactWriteItems) except when an item has expired
but not been swept (an ``add`` then replaces it: one more), a transaction meets another in
flight (retried), or a query's page has expired items to skip or a partition is deleted.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentloop.store import checks
from agentloop.store import dynamodb_items as items
from agentloop.store.base import (
    Add,
    Conflict,
    Delete,
    LimitExceeded,
    Op,
    Page,
    Put,
    Record,
    StoreError,
    StoreUnavailable,
)

# Errors that mean "not now": the store is unavailable (after botocore's own retries).
UNAVAILABLE = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "ResourceNotFoundException",
        "AccessDeniedException",
        "UnrecognizedClientException",
        "ExpiredTokenException",
    }
)
CONDITION_FAILED = frozenset({"ConditionalCheckFailedException", "TransactionCanceledException"})
ATTEMPTS = 4
"""Tries of a write whose item expired meanwhile or whose transaction met another."""


class _Failed(Exception):
    """A condition failed: the response, to be read by the operation that asked."""

    def __init__(self, response: dict[str, Any]) -> None:
        super().__init__(response.get("Error", {}).get("Code", ""))
        self.response = response


class DynamoBackend:
    """The store in one DynamoDB table, through a boto3 client made at the first call."""

    def __init__(
        self,
        table: str,
        *,
        clock: Callable[[], float] = time.time,
        region: str | None = None,
        endpoint_url: str | None = None,
        max_attempts: int = 3,
    ) -> None:
        self.table = table
        self.clock = clock
        self.region = region
        self.endpoint_url = endpoint_url
        self.max_attempts = max_attempts
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        """The boto3 client (made once; tests and benchmarks hook its events)."""
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        import boto3  # type: ignore[import-untyped, unused-ignore]
        from botocore.config import Config  # type: ignore[import-untyped, unused-ignore]

        config = Config(
            connect_timeout=2,
            read_timeout=5,
            retries={"mode": "standard", "total_max_attempts": self.max_attempts},
        )
        # A session per client: boto3's default session is not thread-safe to create from.
        session = boto3.session.Session()
        return session.client(
            "dynamodb", region_name=self.region, endpoint_url=self.endpoint_url, config=config
        )

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        """One request; botocore's failures as StoreUnavailable, a failed condition as _Failed."""
        from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
            BotoCoreError,
            ClientError,
        )

        try:
            response: dict[str, Any] = getattr(self.client, operation)(**params)
            return response
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code in CONDITION_FAILED:
                raise _Failed(exc.response) from exc
            detail = f"dynamodb {self.table} {operation}: {code}: {error.get('Message', '')}"
            if code == "ValidationException":
                message = error.get("Message", "")
                raise StoreError(f"the store refused the request: {message}") from exc
            raise StoreUnavailable("the store is unavailable", detail) from exc
        except BotoCoreError as exc:
            detail = f"dynamodb {self.table} {operation}: {type(exc).__name__}: {exc}"
            raise StoreUnavailable("the store is unavailable", detail) from exc

    def _now(self) -> int:
        return checks.now_seconds(self.clock)

    def _write(self, request: items.Request) -> dict[str, Any]:
        operation = {"Put": "put_item", "Update": "update_item", "Delete": "delete_item"}
        return self._call(operation[request.kind], TableName=self.table, **request.params)

    # -- operations ---------------------------------------------------------------------------

    def get(self, partition: str, sort: str) -> Record | None:
        checks.check_key(partition, sort)
        response = self._call(
            "get_item", TableName=self.table, Key=items.key(partition, sort), ConsistentRead=True
        )
        return items.live(response.get("Item"), self._now())

    def put(self, op: Put) -> Record:
        now = self._now()
        request = items.put_request(op, now)
        try:
            self._write(request)
        except _Failed as failed:
            old = items.live(failed.response.get("Item"), now)
            raise Conflict(op.partition, op.sort, old.version if old else None) from None
        assert request.result is not None
        return request.result

    def delete(self, op: Delete) -> bool:
        now = self._now()
        request = items.delete_request(op, now)
        request.params["ReturnValues"] = "ALL_OLD"
        try:
            response = self._write(request)
        except _Failed as failed:
            old = items.live(failed.response.get("Item"), now)
            raise Conflict(op.partition, op.sort, old.version if old else None) from None
        return items.live(response.get("Attributes"), now) is not None

    def add(self, op: Add) -> Record:
        for _ in range(ATTEMPTS):
            now = self._now()
            request = items.add_request(op, now)
            request.params["ReturnValues"] = "ALL_NEW"
            try:
                return items.to_record(self._write(request)["Attributes"])
            except _Failed as failed:
                expired = self._add_refused(op, failed.response.get("Item"), now, None)
            try:
                return self._replace_expired(op, expired)
            except _Failed:
                continue  # another writer replaced it first: add to theirs
        raise StoreUnavailable("the store is busy", f"add on {op.partition!r} kept conflicting")

    def _add_refused(
        self, op: Add, item: dict[str, Any] | None, now: int, index: int | None
    ) -> int:
        """Why an add's condition failed: LimitExceeded, or the version of an expired item."""
        old = items.live(item, now)
        if old is None and item:
            return int(item[items.VERSION]["N"])  # expired, not yet swept
        over = checks.over_limit(old.counters if old else {}, op)
        if over is None:  # cannot happen: the condition failed on this very item
            raise StoreUnavailable("the store is busy", f"add on {op.partition!r} failed")
        name, value = over
        limit = (op.limits or {})[name]
        raise LimitExceeded(op.partition, op.sort, name, value, op.deltas[name], limit, index)

    def _replace_expired(self, op: Add, expired_version: int) -> Record:
        over = checks.over_limit({}, op)
        if over is not None:
            limit = (op.limits or {})[over[0]]
            raise LimitExceeded(op.partition, op.sort, over[0], 0, op.deltas[over[0]], limit)
        request = items.replace_expired_request(op, expired_version)
        self._write(request)
        assert request.result is not None
        return request.result

    def transact(self, ops: Sequence[Op]) -> None:
        checks.check_transact(ops)
        expired: dict[int, int] = {}
        for attempt in range(ATTEMPTS):
            now = self._now()
            requests = [self._request(op, now, expired.get(i), i) for i, op in enumerate(ops)]
            try:
                self._call(
                    "transact_write_items",
                    TransactItems=[
                        {r.kind: {"TableName": self.table, **r.params}} for r in requests
                    ],
                )
                return
            except _Failed as failed:
                reasons = failed.response.get("CancellationReasons") or []
                self._cancelled(ops, reasons, now, expired)
            time.sleep(
                random.uniform(0, 0.02 * 2**attempt)
            )  # in a worker thread, not the event loop
        raise StoreUnavailable("the store is busy", "a transaction kept conflicting")

    def _request(self, op: Op, now: int, expired_version: int | None, index: int) -> items.Request:
        if isinstance(op, Put):
            return items.put_request(op, now)
        if isinstance(op, Delete):
            return items.delete_request(op, now)
        if expired_version is None:
            return items.add_request(op, now)
        over = checks.over_limit({}, op)  # the counters start again from 0
        if over is not None:
            limit = (op.limits or {})[over[0]]
            raise LimitExceeded(op.partition, op.sort, over[0], 0, op.deltas[over[0]], limit, index)
        return items.replace_expired_request(op, expired_version)

    def _cancelled(
        self, ops: Sequence[Op], reasons: list[dict[str, Any]], now: int, expired: dict[int, int]
    ) -> None:
        """Raise what a cancelled transaction means; return to try again (an item expired,
        another transaction was in flight)."""
        for index, reason in enumerate(reasons):
            code, op = reason.get("Code"), ops[index]
            if code == "ConditionalCheckFailed":
                item = reason.get("Item")
                if isinstance(op, Add):
                    if index in expired:  # it was replaced by another writer: add to theirs
                        del expired[index]
                        continue
                    expired[index] = self._add_refused(op, item, now, index)
                    continue
                old = items.live(item, now)
                raise Conflict(op.partition, op.sort, old.version if old else None, index)
            if code not in (None, "None", "TransactionConflict"):
                raise StoreError(f"the store refused a transaction: {code}")

    def query(
        self, partition: str, prefix: str, limit: int, after: str | None, newest_first: bool
    ) -> Page:
        checks.check_query(partition, prefix, limit)
        params = self._query_params(partition, prefix, newest_first)
        if after is not None:
            last = checks.read_cursor(after, partition, prefix, newest_first)
            params["ExclusiveStartKey"] = items.key(partition, last)
        records: list[Record] = []
        for _ in range(10):  # bounded: each round skips what expired
            params["Limit"] = limit - len(records)
            response = self._call("query", **params)
            records += [
                r for r in map(items.to_record, response.get("Items", [])) if self._is_live(r)
            ]
            last_key = response.get("LastEvaluatedKey")
            if last_key is None or len(records) >= limit:
                break
            params["ExclusiveStartKey"] = last_key
        if last_key is None:
            return Page(records, None)
        return Page(
            records, checks.make_cursor(partition, prefix, newest_first, last_key[items.SK]["S"])
        )

    def _is_live(self, record: Record) -> bool:
        return record.expires_at is None or record.expires_at > self._now()

    def _query_params(self, partition: str, prefix: str, newest_first: bool) -> dict[str, Any]:
        names = {"#pk": items.PK, "#exp": items.EXPIRES}
        values: dict[str, Any] = {":pk": items.s(partition), ":now": items.n(self._now())}
        condition = "#pk = :pk"
        if prefix:
            names["#sk"] = items.SK
            values[":prefix"] = items.s(prefix)
            condition += " AND begins_with(#sk, :prefix)"
        return {
            "TableName": self.table,
            "KeyConditionExpression": condition,
            "FilterExpression": "attribute_not_exists(#exp) OR #exp > :now",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": not newest_first,
            "ConsistentRead": True,
        }

    def delete_partition(self, partition: str) -> int:
        checks.check_text("partition", partition, empty=False)
        now, live, start = self._now(), 0, None
        while True:
            params: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "#pk = :pk",
                "ProjectionExpression": "#pk, #sk, #exp",
                "ExpressionAttributeNames": {
                    "#pk": items.PK,
                    "#sk": items.SK,
                    "#exp": items.EXPIRES,
                },
                "ExpressionAttributeValues": {":pk": items.s(partition)},
                "ConsistentRead": True,
            }
            if start is not None:
                params["ExclusiveStartKey"] = start
            response = self._call("query", **params)
            found = response.get("Items", [])
            live += sum(
                1 for i in found if items.EXPIRES not in i or int(i[items.EXPIRES]["N"]) > now
            )
            for chunk in range(0, len(found), 25):
                self._delete_batch(
                    [
                        {items.PK: i[items.PK], items.SK: i[items.SK]}
                        for i in found[chunk : chunk + 25]
                    ]
                )
            start = response.get("LastEvaluatedKey")
            if start is None:
                return live

    def _delete_batch(self, keys: list[dict[str, Any]]) -> None:
        pending = [{"DeleteRequest": {"Key": k}} for k in keys]
        for attempt in range(ATTEMPTS + 2):
            response = self._call("batch_write_item", RequestItems={self.table: pending})
            pending = response.get("UnprocessedItems", {}).get(self.table, [])
            if not pending:
                return
            time.sleep(
                random.uniform(0, 0.05 * 2**attempt)
            )  # in a worker thread, not the event loop
        raise StoreUnavailable("the store is busy", "a partition's deletes were not processed")

    def check(self) -> None:
        self._call(
            "get_item",
            TableName=self.table,
            Key=items.key("store#check", "check"),
            ConsistentRead=True,
        )

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
