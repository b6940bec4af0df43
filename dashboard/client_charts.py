"""The client usage page's chart for a chosen range: the last hour per minute or the last 24 hours per hour
(the subscriber's own history in Redis), or the
last 7 or 30 days (the daily usage rows with the live counters laid over, :mod:`usage.reports`).

When Redis cannot be read, the minute and hour ranges fall back to the daily chart with a notice, as the
staff dashboard does (:mod:`dashboard.history`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from quotas.internal_api import STORE_ERRORS, back_office
from quotas.observability.history import Resolution

from .history import UNREADABLE

logger = logging.getLogger(__name__)

#: The ranges offered: the history's resolution (None: daily rows), how far back, and the chart's title.
RANGES: dict[str, tuple[Resolution | None, timedelta, str]] = {
    "1h": ("minute", timedelta(hours=1), "Requests per minute (last hour)"),
    "24h": ("hour", timedelta(hours=24), "Requests per hour (last 24 hours)"),
    "7d": (None, timedelta(days=7), "Requests per day (last 7 days)"),
    "30d": (None, timedelta(days=30), "Requests per day (last 30 days)"),
}
DEFAULT_RANGE = "30d"


def range_from(value: str | None) -> str:
    """The range asked for in the query string, or the default (30 days) for a missing or unknown one."""
    return value if value in RANGES else DEFAULT_RANGE


def client_chart(chosen: str, rows: list[dict[str, Any]], tag: str, *, now: datetime | None = None) -> dict[str, Any]:
    """The chart's JSON for range ``chosen``: ``labels`` (UTC ISO times, or ISO dates for days), ``allowed``,
    ``denied``, ``resolution``, ``title``, ``shown`` (the range drawn: 30d when Redis cannot be read) and
    ``notice``. ``rows`` are the client's daily report rows of the last 30 days, oldest first."""
    resolution, span, title = RANGES[chosen]
    notice = None
    if resolution is not None:
        now = now or datetime.now(UTC)
        step = timedelta(minutes=1) if resolution == "minute" else timedelta(hours=1)
        try:
            points = back_office().client_history(tag, resolution, start=now - span + step, end=now)
        except STORE_ERRORS:
            logger.warning("usage page: the client's history is unreadable, showing days", exc_info=True)
            notice, chosen = UNREADABLE, DEFAULT_RANGE
            title = RANGES[DEFAULT_RANGE][2]
        else:
            return {
                "shown": chosen,
                "resolution": resolution,
                "title": title,
                "notice": None,
                "labels": [_iso(p.start) for p in points],
                "allowed": [p.allowed for p in points],
                "denied": [p.denied for p in points],
            }
    days = rows[-RANGES[chosen][1].days :]
    return {
        "shown": chosen,
        "resolution": "day",
        "title": title,
        "notice": notice,
        "labels": [str(r["day"]) for r in days],
        "allowed": [r["allowed"] for r in days],
        "denied": [r["denied"] for r in days],
    }


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
