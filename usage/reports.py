"""Usage reports: flushed rows from the database with the live Redis counters laid over them.

Days older than what Redis still holds come from the database alone, summed
there. For the recent days (today and the previous ``RETENTION_DAYS``), each
row is merged with its live Redis counterpart the same way a flush would
write it (request counters: the larger; cost: Redis's), so a report never
waits for the next flush and never counts anything twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from django.db.models import Sum

from plans.models import Plan
from quotas.formats.money import api_amount, from_micros
from quotas.internal_api import RETENTION_DAYS, Counters, RowKey, back_office, readable_days, usage_date

from . import rows as row_shape
from .models import COUNTERS, UsageRecord

GROUPS = ("day", "scope")
MAX_DAYS = 366


@dataclass(frozen=True, slots=True)
class UsageQuery:
    """What a report covers: a day range, a grouping, and optionally one client and one plan."""

    start: date
    end: date
    group_by: str = "day"
    client: str | None = None  # a client tag without braces; None: every client
    plan: Plan | None = None


def build_report(query: UsageQuery, live: bool = True, today: date | None = None) -> dict[str, Any]:
    """The report of ``query``: ``rows`` (one per day or scope, with usage) and ``totals``.

    ``today`` defaults to the usage day (``BUDGET_TIME_ZONE``) of the Redis server's clock, the one usage
    is counted under. With ``live`` False the report holds flushed rows only (and reads nothing from Redis).
    Raises ``STORE_ERRORS`` when Redis fails.
    """
    live_days: list[date] = []
    if live:
        today = today or usage_date(back_office().now())
        live_days = [d for d in readable_days(today, RETENTION_DAYS) if query.start <= d <= query.end]
    groups: dict[Any, Counters] = {}
    records = _records(query)
    settled = (
        records.exclude(day__in=live_days).order_by().values(query.group_by).annotate(**{c: Sum(c) for c in COUNTERS})
    )
    for row in settled:
        _add(groups, row[query.group_by], row)
    for key, counters in _live_rows(query, records.filter(day__in=live_days), live_days).items():
        _add(groups, key.day if query.group_by == "day" else key.scope, counters)
    rows = [_row(query.group_by, group, groups[group]) for group in sorted(groups)]
    totals = dict.fromkeys(COUNTERS, 0)
    for counters in groups.values():
        _add_to(totals, counters)
    return {
        "from": query.start,
        "to": query.end,
        "group_by": query.group_by,
        "client": query.client,
        "plan": query.plan.slug if query.plan else None,
        "rows": rows,
        "totals": _counters_out(totals),
    }


def merge_live(flushed: Counters, live: Counters) -> Counters:
    """A row as the next flush would write it: the larger request counters, Redis's cost."""
    merged = {c: max(flushed.get(c, 0), live.get(c, 0)) for c in COUNTERS}
    merged["cost_micros"] = live.get("cost_micros", 0)
    return merged


def _records(query: UsageQuery) -> Any:
    records = UsageRecord.objects.filter(day__range=(query.start, query.end))
    if query.client is not None:
        records = records.filter(client=query.client)
    if query.plan is not None:
        records = records.filter(plan_key=query.plan.pk)
    return records


def _live_rows(query: UsageQuery, records: Any, days: list[date]) -> dict[RowKey, Counters]:
    if not days:
        return {}
    rows: dict[RowKey, Counters] = {
        RowKey(r["client"], r["plan_key"], r["scope"], r["day"], r["generation"]): {c: r[c] for c in COUNTERS}
        for r in records.values("client", "plan_key", "scope", "day", "generation", *COUNTERS)
    }
    for key, counters in back_office().usage_rows(days, query.client).items():
        if query.plan is None or key.plan_key == query.plan.pk:
            rows[key] = merge_live(rows.get(key, {}), counters)
    return rows


def _add(groups: dict[Any, Counters], group: Any, counters: dict[str, Any]) -> None:
    _add_to(groups.setdefault(group, dict.fromkeys(COUNTERS, 0)), counters)


def _add_to(total: Counters, counters: dict[str, Any]) -> None:
    for c in COUNTERS:
        total[c] += counters.get(c) or 0


def _row(group_by: str, group: Any, counters: Counters) -> dict[str, Any]:
    value = (group or None) if group_by == "scope" else group
    return {group_by: value, **_counters_out(counters)}


def _counters_out(c: Counters) -> dict[str, Any]:
    denied_by = {reason: c[f"denied_{reason}"] for reason in ("rate", "budget", "acl", "capacity", "banned")}
    return row_shape.counters(
        c["allowed"],
        denied_by,
        shadow_would_deny=c["shadow_would_deny"],
        weight=c["weight"],
        cost=api_amount(from_micros(c["cost_micros"])),  # a decimal string: exact, unlike a JSON number
    )
