"""The staff dashboard's traffic and denial-rate charts for a chosen range: the last hour per minute, the last
24 hours or 7 days per hour (the engine's history in Redis, :mod:`quotas.observability.history`), or the
daily usage (database rows with the live counters laid over, :class:`dashboard.queries.UsageSlice`).

Both charts honour the page's plan and scope filters. Each denial-rate line is one plan or one scope (the few
with the most traffic, so the chart stays readable); the alert table looks at every plan and scope. When Redis
cannot be read, the minute and hour ranges fall back to the daily chart with a notice.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from quotas.internal_api import STORE_ERRORS, back_office
from quotas.observability.history import Resolution, bucket_starts
from quotas.rules.snapshot import RuleSet
from quotas.settings import quota_settings

from .queries import REASONS as DAILY_REASONS
from .queries import Filters, UsageSlice

logger = logging.getLogger(__name__)

#: The ranges the page offers: the history's resolution (None: the daily usage) and how far back.
RANGES: dict[str, tuple[Resolution | None, timedelta]] = {
    "1h": ("minute", timedelta(hours=1)),
    "24h": ("hour", timedelta(hours=24)),
    "7d": ("hour", timedelta(days=7)),
    "30d": (None, timedelta(days=30)),
}
DEFAULT_RANGE = "24h"
#: Chart series of refusals: label -> counter, the daily chart's and the headline cards' (history's and
#: UsageRecord's names agree).
REASONS = DAILY_REASONS
#: History-only counters drawn within a reason's series: refusals a process answered from its memory of a
#: client over a rate limit ("denied_local") are rate refusals, as the cards and the daily rows count them, so
#: every range shows the categories the cards show.
FOLDED = {"rate": ("denied_local",)}
#: Plans, and scopes, drawn on the denial-rate chart: those with the most requests in the range.
RATE_LINES = 3
NO_PLAN, NO_SCOPE = "(no plan)", "(none)"
UNREADABLE = "Recent history unavailable (Redis cannot be reached): showing requests per day."

#: (point index, plan name, scope, counters): one plan and scope's counts in one minute, hour or day.
Cell = tuple[int, str, str, dict[str, int]]


def range_from(value: str | None) -> str:
    """The range asked for in the query string, or the default for a missing or unknown one."""
    return value if value in RANGES else DEFAULT_RANGE


#: Characters of an ``alert`` parameter read at most: longer text is no fraction anyone typed.
_ALERT_TEXT_MAX = 20


def alert_from(value: str | None) -> float | None:
    """``?alert=0.05`` as a fraction from 0 to 1; None (the setting applies) for anything else."""
    try:
        alert = float(value) if value is not None and len(value) < _ALERT_TEXT_MAX else None
    except ValueError:
        return None
    return alert if alert is not None and math.isfinite(alert) and 0 <= alert <= 1 else None


def charts(filters: Filters, rules: RuleSet, usage: UsageSlice) -> dict[str, Any]:
    """The traffic and denial-rate charts of ``filters.range``, with the alert threshold and the plans and
    scopes above it. The range shown is ``shown``: ``30d`` (with a ``notice``) when Redis cannot be read."""
    threshold = filters.alert if filters.alert is not None else float(quota_settings.DENIAL_RATE_ALERT)
    resolution, span = RANGES[filters.range]
    notice = None
    if resolution is not None:
        try:
            labels, cells = history_cells(resolution, span, filters=filters, rules=rules)
            return {"shown": filters.range, "resolution": resolution, "notice": None, **build(labels, cells, threshold)}
        except STORE_ERRORS:
            logger.warning("dashboard: the engine's history is unreadable, showing days", exc_info=True)
            notice = UNREADABLE
    labels, cells = daily_cells(usage, rules)
    return {"shown": "30d", "resolution": "day", "notice": notice, **build(labels, cells, threshold)}


def history_cells(
    resolution: Resolution, span: timedelta, *, filters: Filters, rules: RuleSet, now: datetime | None = None
) -> tuple[list[str], list[Cell]]:
    """Labels (UTC ISO times of each minute or hour, the current one last) and the cells of the history
    ``span`` back from ``now`` that pass the filters. Raises ``STORE_ERRORS`` when Redis fails."""
    now = now or datetime.now(UTC)
    step = timedelta(minutes=1) if resolution == "minute" else timedelta(hours=1)
    starts = bucket_starts(resolution, now - span + step, now)
    index = {at: n for n, at in enumerate(starts)}
    start = datetime.fromtimestamp(starts[0], UTC)
    plan = rules.plans.get(filters.plan_id) if filters.plan_id is not None else None
    names = {p.slug: p.name for p in rules.plans.values()}
    cells: list[Cell] = []
    for bucket in back_office().history(resolution, start, now):
        if filters.plan_id is not None and (plan is None or bucket.plan != plan.slug):
            continue
        if filters.scope is not None and (bucket.scope or "") != filters.scope:
            continue
        name = names.get(bucket.plan, bucket.plan) if bucket.plan else NO_PLAN
        cells.append((index[int(bucket.start.timestamp())], name, bucket.scope or NO_SCOPE, bucket.counters))
    return [_iso(datetime.fromtimestamp(at, UTC)) for at in starts], cells


def daily_cells(usage: UsageSlice, rules: RuleSet) -> tuple[list[str], list[Cell]]:
    """Labels (each day of the slice, ISO dates) and its cells (the slice applied the filters already)."""
    days: list[date] = [usage.filters.start + timedelta(days=n) for n in range(usage.filters.days)]
    index = {d: n for n, d in enumerate(days)}
    cells: list[Cell] = []
    for (day, plan_key, scope), counters in usage.cells.items():
        plan = rules.plans.get(plan_key)
        name = plan.name if plan is not None else NO_PLAN if not plan_key else f"plan {plan_key}"
        if day in index:
            cells.append((index[day], name, scope or NO_SCOPE, counters))
    return [d.isoformat() for d in days], cells


def build(labels: list[str], cells: Iterable[Cell], threshold: float) -> dict[str, Any]:
    """The charts' JSON from the cells: stacked traffic, denial-rate lines, and the alerts."""
    size = len(labels)
    allowed = [0] * size
    denied = {reason: [0] * size for reason in REASONS}
    by_plan: defaultdict[str, list[list[int]]] = defaultdict(lambda: [[0] * size, [0] * size])  # [refused, all]
    by_scope: defaultdict[str, list[list[int]]] = defaultdict(lambda: [[0] * size, [0] * size])
    for n, plan, scope, counters in cells:
        allowed[n] += counters.get("allowed", 0)
        refused = 0
        for reason, counter in REASONS.items():
            count = counters.get(counter, 0) + sum(counters.get(c, 0) for c in FOLDED.get(reason, ()))
            denied[reason][n] += count
            refused += count if reason != "shadow" else 0  # shadow refusals were admitted
        for groups, key in ((by_plan, plan), (by_scope, scope)):
            groups[key][0][n] += refused
            groups[key][1][n] += counters.get("allowed", 0) + refused
    rates = {"plans": _lines(by_plan), "scopes": _lines(by_scope)}
    above = _above(labels, "plan", by_plan, threshold) + _above(labels, "scope", by_scope, threshold)
    return {
        "labels": labels,
        "allowed": allowed,
        "denied": denied,
        "rates": rates,
        "alert": {"threshold": threshold, "above": sorted(above, key=lambda a: -a["rate"])},
    }


def _lines(groups: dict[str, list[list[int]]]) -> list[dict[str, Any]]:
    """The RATE_LINES busiest groups' rates (None where nothing was decided), busiest first."""
    busiest = sorted(groups.items(), key=lambda item: (-sum(item[1][1]), item[0]))[:RATE_LINES]
    return [
        {
            "name": name,
            "requests": sum(total),
            "rates": [round(r / t, 4) if t else None for r, t in zip(refused, total, strict=True)],
        }
        for name, (refused, total) in busiest
    ]


def _above(labels: list[str], kind: str, groups: dict[str, list[list[int]]], threshold: float) -> list[dict[str, Any]]:
    """The groups whose latest point with traffic is refused more often than ``threshold``."""
    out = []
    for name, (refused, total) in groups.items():
        latest = max((n for n, t in enumerate(total) if t), default=None)
        if latest is not None and refused[latest] / total[latest] > threshold:
            out.append(
                {
                    "kind": kind,
                    "name": name,
                    "rate": round(refused[latest] / total[latest], 4),
                    "refused": refused[latest],
                    "requests": total[latest],
                    "at": labels[latest],
                }
            )
    return out


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")
