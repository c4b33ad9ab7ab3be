"""The windows limits are counted in: the UTC day, the UTC month and the minute.

Each is a fixed window named by a sort key that sorts in time order, with the epoch second
it ends at (its reset time). Pure: the time is passed in (the quota's injected clock).
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass

DAY_S = 86_400


@dataclass(frozen=True)
class Windows:
    """The windows ``now`` falls in, and when each ends."""

    now: int
    day: str
    day_ends: int
    month: str
    month_ends: int
    minute: str
    minute_ends: int

    @classmethod
    def at(cls, now: float) -> Windows:
        second = int(now)
        t = time.gmtime(second)
        day_start = calendar.timegm((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0))
        year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
        minute = second // 60
        return cls(
            now=second,
            day=f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}",
            day_ends=day_start + DAY_S,
            month=f"{t.tm_year:04d}-{t.tm_mon:02d}",
            month_ends=calendar.timegm((year, month, 1, 0, 0, 0)),
            minute=f"{minute:012d}",
            minute_ends=(minute + 1) * 60,
        )
