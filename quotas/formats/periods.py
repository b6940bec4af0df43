"""Calendar periods for budgets and period quotas: day, week, month, billing month.

Periods are calendar-aligned in ``QUOTAS['BUDGET_TIME_ZONE']``; a billing
month starts on the subscription's anchor day (clamped to the month's last
day, so an anchor of 31 renews on 30 April and 28/29 February).

The application computes the current and the next boundaries from its own
clock; the decision script then picks the period with the Redis server's
clock (see ``period.lua``), so an application host whose clock is off by
less than a period cannot move a reset.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

PERIODS = ("day", "week", "month", "billing_month")


@dataclass(frozen=True, slots=True)
class Bounds:
    """The current period ``[start, end)`` and the end of the one after, in epoch seconds."""

    start: int
    end: int
    next_end: int


def _month_start(year: int, month: int, anchor: int) -> date:
    last = calendar.monthrange(year, month)[1]
    return date(year, month, min(anchor, last))


def _add_months(year: int, month: int, n: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + n
    return index // 12, index % 12 + 1


def _starts(kind: str, today: date, anchor: int) -> tuple[date, date, date]:
    """Local dates starting the current, next and following periods."""
    if kind == "day":
        return today, today + timedelta(days=1), today + timedelta(days=2)
    if kind == "week":
        monday = today - timedelta(days=today.weekday())
        return monday, monday + timedelta(days=7), monday + timedelta(days=14)
    if kind == "month":
        anchor = 1
    elif kind != "billing_month":
        raise ValueError(f"Unknown period {kind!r}; use one of {', '.join(PERIODS)}.")
    year, month = today.year, today.month
    start = _month_start(year, month, anchor)
    if start > today:
        year, month = _add_months(year, month, -1)
        start = _month_start(year, month, anchor)
    ny, nm = _add_months(year, month, 1)
    fy, fm = _add_months(year, month, 2)
    return start, _month_start(ny, nm, anchor), _month_start(fy, fm, anchor)


@lru_cache(maxsize=4096)
def _bounds_for_day(kind: str, today: date, anchor: int, tz_name: str) -> Bounds:
    tz = ZoneInfo(tz_name)
    start, end, next_end = (
        int(datetime.combine(d, time.min, tzinfo=tz).timestamp()) for d in _starts(kind, today, anchor)
    )
    return Bounds(start, end, next_end)


def period_bounds(kind: str, now: float, tz_name: str = "UTC", anchor: int = 1) -> Bounds:
    """The period of ``kind`` containing ``now`` (epoch seconds) in time zone ``tz_name``."""
    today = datetime.fromtimestamp(now, ZoneInfo(tz_name)).date()
    return _bounds_for_day(kind, today, anchor, tz_name)


@dataclass(frozen=True, slots=True)
class UsageDay:
    """The usage day containing a moment: usage is dated where budget days begin (``BUDGET_TIME_ZONE``).

    A usage row of a day then holds the same requests as a daily budget's period, so a customer whose
    budget is 1.00 a day never sees a day of 1.80.
    """

    date: date
    days: int  # the date's index in days since 1970-01-01 (the usage hash's day, for Lua)
    stamp: str  # "YYYYMMDD": the suffix of that day's usage keys
    offset: int  # the time zone's UTC offset (seconds) at that moment, so a script can date by its own clock


#: Seconds of a UTC quarter hour. Every UTC offset in use is a whole number of quarter hours, and zones change
#: offset at whole local hours, so a local midnight or a DST change falls on a quarter-hour boundary of UTC: the
#: usage day is the same all through one. A quarter hour is cached where its first and last second agree.
_QUARTER = 900
_cached: tuple[str, int, UsageDay] | None = None


def usage_day(now: float, tz_name: str) -> UsageDay:
    """The usage day containing ``now`` (epoch seconds) in time zone ``tz_name`` (``BUDGET_TIME_ZONE``).

    Every decision dates its usage, so the day of the current quarter hour is kept: a cold decision then spends
    no time on time zones, about 25 us of its own cost (``make bench``'s latency section; the runs are in
    docs/benchmark-history.md). The store keeps its own (see :func:`usage_day_span`).
    """
    global _cached
    quarter = int(now // _QUARTER)
    cached = _cached
    if cached is not None and cached[1] == quarter and cached[0] == tz_name:
        return cached[2]
    day, start, end = usage_day_span(now, tz_name)
    if end > start:
        _cached = (tz_name, quarter, day)  # one tuple, replaced whole: safe to read from any thread
    return day


def usage_day_span(now: float, tz_name: str) -> tuple[UsageDay, int, int]:
    """The usage day containing ``now`` in ``tz_name``, and the epoch seconds ``[start, end)`` of the quarter
    hour around it all of which has that day (and UTC offset); ``start == end`` when part of it has not (a zone
    whose offset is not a whole number of quarter hours), so the day holds for ``now`` alone."""
    day = _usage_day(now, tz_name)
    start = int(now // _QUARTER) * _QUARTER
    if _usage_day(start, tz_name) == _usage_day(start + _QUARTER - 1, tz_name) == day:
        return day, start, start + _QUARTER
    return day, start, start


def _usage_day(now: float, tz_name: str) -> UsageDay:
    local = datetime.fromtimestamp(now, ZoneInfo(tz_name))
    offset = local.utcoffset()
    seconds = int(offset.total_seconds()) if offset is not None else 0
    day = local.date()
    return UsageDay(day, day.toordinal() - _EPOCH_ORDINAL, f"{day:%Y%m%d}", seconds)


def usage_date(moment: datetime, tz_name: str) -> date:
    """The usage day containing ``moment`` (an aware datetime) in ``tz_name``: the ``day`` of its usage rows."""
    return usage_day(moment.timestamp(), tz_name).date


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
