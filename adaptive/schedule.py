"""Planned capacity by time of day (``QUOTAS['ADAPTIVE']['SCHEDULE']``).

A schedule is a list of windows of wall-clock time in ``SCHEDULE_TIME_ZONE`` (Django's ``TIME_ZONE`` when
None), each with the share of capacity planned for it::

    "SCHEDULE": [{"start": "01:00", "end": "04:00", "capacity": 0.5}],  # the nightly batch takes half

A window runs from ``start`` (included) to ``end`` (excluded); one whose end is earlier than its start runs
past midnight, and an end of ``"24:00"`` (or ``"00:00"``) is midnight. Windows may not overlap, so one instant
has one planned capacity; outside every window it is 1.0. The controller caps its capacity level at the planned
capacity (:func:`adaptive.policy.step`), so the cheap plans are shed first, and recovers gradually when the
window ends. Wall-clock time means a window follows daylight saving time: 01:00 is 01:00 local all year.

Nothing here does I/O; :func:`planned_capacity` takes the time as an argument.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from typing import Any

from django.core.checks import CheckMessage, Error

_TIME = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$|^24:00$")
_DAY = 24 * 60  # minutes
_KEYS = ("start", "end", "capacity")


@dataclass(frozen=True, slots=True)
class Window:
    """One window of a schedule: minutes of the day it starts and ends at, and its planned capacity."""

    start: int
    end: int
    capacity: float

    def __str__(self) -> str:
        return f"{_hhmm(self.start)}-{_hhmm(self.end)}"

    def spans(self) -> list[tuple[int, int]]:
        """The minutes of the day it covers, as half-open ranges (two when it runs past midnight)."""
        if self.start < self.end:
            return [(self.start, self.end)]
        return [(self.start, _DAY), (0, self.end)]

    def covers(self, minute: float) -> bool:
        """Whether ``minute`` (minutes since local midnight, fractions for seconds) lies in this window."""
        return any(start <= minute < end for start, end in self.spans())


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def parse_time(text: Any) -> int | None:
    """Minutes since midnight of ``"HH:MM"`` (``"24:00"`` is 1440), or None when it is not such a time."""
    match = _TIME.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    return _DAY if text == "24:00" else int(match.group(1)) * 60 + int(match.group(2))


def parse_window(raw: Any) -> Window | str:
    """The window described by ``raw``, or what is wrong with it (capacity aside: any number is parsed)."""
    if not isinstance(raw, dict) or set(raw) != set(_KEYS):
        return "must be a dict of exactly 'start', 'end' and 'capacity'"
    start, end, capacity = parse_time(raw["start"]), parse_time(raw["end"]), raw["capacity"]
    if start is None or start == _DAY:
        return f"has start {raw['start']!r}, not a time 'HH:MM' from 00:00 to 23:59"
    if end is None:
        return f"has end {raw['end']!r}, not a time 'HH:MM' from 00:00 to 24:00"
    end = end or _DAY  # a window ending at 00:00 ends at midnight
    if start == end:
        return f"starts and ends at {raw['start']} (for the whole day use 00:00 to 24:00)"
    if isinstance(capacity, bool) or not isinstance(capacity, int | float):
        return f"has capacity {capacity!r}, not a number"
    return Window(start, end, float(capacity))


def parse_schedule(raw: Sequence[Any]) -> list[Window]:
    """The windows of a schedule that passed :func:`check_schedule` (malformed ones are left out)."""
    return [window for window in map(parse_window, raw) if isinstance(window, Window)]


def capacity_at(windows: Sequence[Window], minute: float) -> tuple[float, Window | None]:
    """The planned capacity at ``minute`` of the local day, and the window planning it (None: full capacity)."""
    for window in windows:
        if window.covers(minute):
            return window.capacity, window
    return 1.0, None


def planned_capacity(schedule: Sequence[Any], time_zone: str, now: float) -> tuple[float, Window | None]:
    """The capacity ``schedule`` plans at ``now`` (seconds since the epoch) in ``time_zone``, and its window."""
    local = datetime.fromtimestamp(now, tz=zoneinfo.ZoneInfo(time_zone))
    minute = local.hour * 60 + local.minute + (local.second + local.microsecond / 1e6) / 60
    return capacity_at(parse_schedule(schedule), minute)


def check_schedule(value: list[Any], label: str) -> Iterator[str | CheckMessage]:
    """What is wrong with a schedule: malformed windows (the setting's id), capacities out of (0, 1]
    (``adaptive.E018``), overlapping windows (``adaptive.E017``)."""
    windows = []
    for n, raw in enumerate(value):
        window = parse_window(raw)
        if isinstance(window, str):
            yield f"{label}[{n}] {window}."
            continue
        if not 0 < window.capacity <= 1:
            yield Error(
                f"{label}[{n}] ({window}) has capacity {window.capacity!r}, out of (0, 1].",
                hint="A window's capacity is the share of normal capacity planned for it: 0.5 halves it, 1 leaves "
                "it whole. Cut no further than your cheapest plans' floors allow.",
                id="adaptive.E018",
            )
        windows.append((n, window))
    for (n, first), (m, second) in combinations(windows, 2):
        if any(a < d and c < b for a, b in first.spans() for c, d in second.spans()):
            yield Error(
                f"{label}[{n}] ({first}) and {label}[{m}] ({second}) overlap.",
                hint="One time of day has one planned capacity: make the windows meet (one's end is the next one's "
                "start) or merge them.",
                id="adaptive.E017",
            )


def check_time_zone(value: str | None, label: str) -> Iterator[str]:
    """A time zone name zoneinfo does not know."""
    if value is None:
        return
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        yield f"{label} = {value!r} is not a time zone zoneinfo knows."
