"""One run at a time on a thread: a claim with a lease, kept in the thread's ``lock`` item.

The claim is a conditional write (``put(if_absent=True)``) whose item expires with its
lease, so a process that dies holding it stops blocking the thread when the lease ends:
the store treats an expired item as absent to every write. The run that holds the claim may
claim again to renew it; any other gets ``ThreadBusy``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from agentloop.store import Conflict, Store, StoreUnavailable
from agentloop.threads import keys
from agentloop.threads.errors import InvalidThreadInput, ThreadBusy

MAX_LEASE_S = 86_400
ATTEMPTS = 4


def lease_end(clock: Callable[[], float], lease_s: float) -> int:
    """When a lease taken now ends (whole seconds, as the store compares expiry)."""
    if isinstance(lease_s, bool) or not isinstance(lease_s, (int, float)):
        raise InvalidThreadInput("lease_s must be a number")
    if not 0 < lease_s <= MAX_LEASE_S:
        raise InvalidThreadInput(f"lease_s must be over 0 and at most {MAX_LEASE_S}")
    return math.floor(clock()) + math.ceil(lease_s)


async def take(store: Store, partition: str, run_id: str, until: int) -> int:
    """Take or renew the claim for ``run_id`` until ``until``; ThreadBusy if another run
    holds it."""
    if not keys.is_append_key(run_id):
        raise InvalidThreadInput("run_id: 1 to 128 printable ASCII characters, no space")
    data = {"run": run_id, "until": until}
    for _ in range(ATTEMPTS):
        try:
            await store.put(partition, keys.LOCK, data, expires_at=until, if_absent=True)
            return until
        except Conflict:
            pass
        held = await store.get(partition, keys.LOCK)
        if held is None:
            continue  # its lease ended or it was released meanwhile
        if held.data.get("run") != run_id:
            raise ThreadBusy(held.expires_at or until)
        try:
            await store.put(partition, keys.LOCK, data, expires_at=until, if_version=held.version)
            return until
        except Conflict:
            continue
    raise StoreUnavailable("the store is busy", f"the claim on {partition!r} kept conflicting")


async def give_back(store: Store, partition: str, run_id: str) -> bool:
    """Release ``run_id``'s claim; False if it no longer holds one (its lease ended, and
    perhaps another run claimed the thread since)."""
    held = await store.get(partition, keys.LOCK)
    if held is None or held.data.get("run") != run_id:
        return False
    try:
        await store.delete(partition, keys.LOCK, if_version=held.version)
    except Conflict:
        return False
    return True
