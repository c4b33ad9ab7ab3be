"""How records are laid out in the DynamoDB table, and the requests that write them.

One table, keys ``pk`` (partition) and ``sk`` (sort), both strings. An item holds ``data``
(the record's JSON as a string: DynamoDB never reads it, and floats need no Decimal),
``ver`` (its version), ``expires_at`` (epoch seconds, the table's TTL attribute) and one
number attribute per counter, ``c_<name>``. Conditions compare single attributes (DynamoDB
has no arithmetic in conditions), so a limit is checked as ``c_x <= limit - delta``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentloop.store import checks
from agentloop.store.base import Add, Delete, Put, Record
from agentloop.store.versions import fresh_version, next_version

PK, SK, DATA, VERSION, EXPIRES = "pk", "sk", "data", "ver", "expires_at"
COUNTER_PREFIX = "c_"
TTL_ATTRIBUTE = EXPIRES
_NOT_EXPIRED = "(attribute_not_exists(#exp) OR #exp > :now)"


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def s(value: str) -> dict[str, str]:
    return {"S": value}


def key(partition: str, sort: str) -> dict[str, Any]:
    return {PK: s(partition), SK: s(sort)}


def to_record(item: dict[str, Any]) -> Record:
    counters = {
        name[len(COUNTER_PREFIX) :]: int(value["N"])
        for name, value in item.items()
        if name.startswith(COUNTER_PREFIX)
    }
    data = json.loads(item[DATA]["S"]) if DATA in item else {}
    expires = int(item[EXPIRES]["N"]) if EXPIRES in item else None
    return Record(item[PK]["S"], item[SK]["S"], data, counters, int(item[VERSION]["N"]), expires)


def live(item: dict[str, Any] | None, now: int) -> Record | None:
    """The item as a record, or None when it is absent or expired."""
    if not item or VERSION not in item:
        return None
    record = to_record(item)
    if record.expires_at is not None and record.expires_at <= now:
        return None
    return record


@dataclass
class Request:
    """One write: its parameters without the table name, as TransactWriteItems takes them."""

    kind: str  # Put, Update, Delete
    params: dict[str, Any] = field(default_factory=dict)
    result: Record | None = None

    def condition(self, expression: str, names: dict[str, str], values: dict[str, Any]) -> None:
        self.params["ConditionExpression"] = expression
        self.params.setdefault("ExpressionAttributeNames", {}).update(names)
        if values:
            self.params.setdefault("ExpressionAttributeValues", {}).update(values)
        self.params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"


def put_request(op: Put, now: int) -> Request:
    text = checks.check_put(op)
    record = Record(op.partition, op.sort, json.loads(text), {}, next_version(op.if_version))
    item = {**key(op.partition, op.sort), DATA: s(text), VERSION: n(record.version)}
    if op.expires_at is not None:
        item[EXPIRES] = n(op.expires_at)
        record = Record(
            record.partition, record.sort, record.data, {}, record.version, op.expires_at
        )
    request = Request("Put", {"Item": item}, record)
    if op.if_absent:
        names = {"#pk": PK, "#exp": EXPIRES}
        request.condition("attribute_not_exists(#pk) OR #exp <= :now", names, {":now": n(now)})
    elif op.if_version is not None:
        _at_version(request, op.if_version, now)
    return request


def delete_request(op: Delete, now: int) -> Request:
    checks.check_delete(op)
    request = Request("Delete", {"Key": key(op.partition, op.sort)})
    if op.if_version is not None:
        _at_version(request, op.if_version, now)
    return request


def _at_version(request: Request, version: int, now: int) -> None:
    """Only if the item is live and at ``version`` (``if_version`` of a put or delete)."""
    names = {"#ver": VERSION, "#exp": EXPIRES}
    values = {":ver": n(version), ":now": n(now)}
    request.condition(f"#ver = :ver AND {_NOT_EXPIRED}", names, values)


def add_request(op: Add, now: int) -> Request:
    """An UpdateItem that adds atomically, on a live or absent item, within the limits."""
    checks.check_add(op)
    names = {"#ver": VERSION, "#exp": EXPIRES}
    values: dict[str, Any] = {":one": n(1), ":zero": n(0), ":fresh": n(fresh_version())}
    sets = ["#ver = if_not_exists(#ver, :fresh) + :one"]
    conditions = [_NOT_EXPIRED]
    values[":now"] = n(now)
    for i, (name, delta) in enumerate(op.deltas.items()):
        names[f"#c{i}"] = COUNTER_PREFIX + name
        values[f":d{i}"] = n(delta)
        sets.append(f"#c{i} = if_not_exists(#c{i}, :zero) + :d{i}")
        if op.limits and name in op.limits:
            values[f":t{i}"] = n(op.limits[name] - delta)
            within = f"#c{i} <= :t{i}"
            # An absent counter is 0: within the limit exactly when the delta is.
            fits_empty = delta <= op.limits[name]
            conditions.append(
                f"(attribute_not_exists(#c{i}) OR {within})" if fits_empty else within
            )
    if op.expires_at is not None:
        sets.append("#exp = :exp")
        values[":exp"] = n(op.expires_at)
    params = {"Key": key(op.partition, op.sort), "UpdateExpression": "SET " + ", ".join(sets)}
    request = Request("Update", params)
    request.condition(" AND ".join(conditions), names, values)
    return request


def replace_expired_request(op: Add, expired_version: int) -> Request:
    """An Add on an item that expired: the counters start again from the deltas, replacing
    the expired item only if nobody else did meanwhile."""
    item = {**key(op.partition, op.sort), DATA: s("{}"), VERSION: n(next_version(None))}
    for name, delta in op.deltas.items():
        item[COUNTER_PREFIX + name] = n(delta)
    if op.expires_at is not None:
        item[EXPIRES] = n(op.expires_at)
    request = Request("Put", {"Item": item}, to_record(item))
    request.condition("#ver = :ver", {"#ver": VERSION}, {":ver": n(expired_version)})
    return request
