"""What the staff dashboard shows, read in a bounded number of queries.

Usage comes from :class:`usage.models.UsageRecord` (one row per client, plan,
scope and UTC day) with the live Redis counters of the days Redis still holds
laid over it exactly as :mod:`usage.reports` does, so today's figures do not
wait for the next flush. The per-minute and per-hour charts read the engine's
history instead (:mod:`dashboard.history`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from adaptive.conf import adaptive_settings
from adaptive.models import AdaptiveSnapshot
from plans.models import Plan, Subscription
from plans.models.budgets import DEFAULT_CURRENCY
from quotas.formats.money import api_amount, format_money
from quotas.internal_api import NEAR, RETENTION_DAYS, STORE_ERRORS, Counters, back_office, readable_days, usage_date
from quotas.rules.snapshot import RuleSet
from usage.models import COUNTERS, DENIALS, UsageRecord
from usage.reports import merge_live

from .load_signals import signal_rows

logger = logging.getLogger(__name__)

#: Series of the denial chart: label -> UsageRecord counter.
REASONS = {
    "rate": "denied_rate",
    "budget": "denied_budget",
    "acl": "denied_acl",
    "capacity": "denied_capacity",
    "banned": "denied_banned",
    "shadow": "shadow_would_deny",
}
TOP = 10
#: A client is an upgrade candidate after this many rate or budget refusals in the window.
UPGRADE_MIN_DENIALS = 5
UPGRADE_DAYS = 7
HISTORY = 50


@dataclass
class Filters:
    """The dashboard's filters: a day range, optionally one plan (id) and one scope; the charts' range
    (``1h``, ``24h``, ``7d`` or ``30d``) and an alert threshold given for this view (None: the setting's)."""

    days: int = 30
    plan_id: int | None = None
    scope: str | None = None
    range: str = "24h"
    alert: float | None = None
    today: date = field(default_factory=lambda: usage_date(timezone.now()))

    @property
    def start(self) -> date:
        return self.today - timedelta(days=self.days - 1)


def denied(counters: Counters) -> int:
    return sum(counters.get(c, 0) for c in DENIALS)


class UsageSlice:
    """Usage of a day range grouped by day (and plan and scope: ``cells``), by client and by scope: four
    queries and one Redis scan."""

    def __init__(self, filters: Filters, live: bool = True) -> None:
        self.filters = filters
        self.live = False
        live_days: list[date] = []
        if live:
            try:
                today = usage_date(back_office().now())
                live_days = [d for d in readable_days(today, RETENTION_DAYS) if filters.start <= d <= filters.today]
                self.live = True
            except STORE_ERRORS:
                logger.warning("dashboard: Redis unavailable, showing flushed usage only", exc_info=True)
        records = UsageRecord.objects.filter(day__range=(filters.start, filters.today))
        if filters.plan_id is not None:
            records = records.filter(plan_key=filters.plan_id)
        if filters.scope is not None:
            records = records.filter(scope=filters.scope)
        settled = records.exclude(day__in=live_days).order_by()
        sums = {c: Sum(c) for c in COUNTERS}
        self.cells = _group(settled.values("day", "plan_key", "scope").annotate(**sums), ("day", "plan_key", "scope"))
        self.by_client = _group(settled.values("client").annotate(**sums), ("client",))
        self.by_scope = _group(settled.values("scope").annotate(**sums), ("scope",))
        for row, counters in self._live_rows(records.filter(day__in=live_days), live_days).items():
            client, plan_key, scope, day, _generation = row
            if filters.plan_id is not None and plan_key != filters.plan_id:
                continue
            if filters.scope is not None and scope != filters.scope:
                continue
            for groups, key in ((self.cells, (day, plan_key, scope)), (self.by_client, client), (self.by_scope, scope)):
                _add(groups[key], counters)
        self.by_day: defaultdict[date, Counters] = defaultdict(lambda: dict.fromkeys(COUNTERS, 0))
        for (day, _plan_key, _scope), counters in self.cells.items():
            _add(self.by_day[day], counters)

    def _live_rows(self, records: Any, days: list[date]) -> dict[tuple, Counters]:
        if not days:
            return {}
        rows: dict[tuple, Counters] = {
            (r["client"], r["plan_key"], r["scope"], r["day"], r["generation"]): {c: r[c] for c in COUNTERS}
            for r in records.values("client", "plan_key", "scope", "day", "generation", *COUNTERS)
        }
        try:
            for key, counters in back_office().usage_rows(days).items():
                rows[tuple(key)] = merge_live(rows.get(tuple(key), {}), counters)
        except STORE_ERRORS:
            self.live = False
            logger.warning("dashboard: Redis unavailable while reading live usage", exc_info=True)
        return rows

    def series(self) -> dict[str, Any]:
        """One point per day of the range: allowed, and denials by reason (zeros where nothing happened)."""
        days = [self.filters.start + timedelta(days=n) for n in range(self.filters.days)]
        empty: Counters = dict.fromkeys(COUNTERS, 0)
        return {
            "labels": [d.isoformat() for d in days],
            "allowed": [self.by_day.get(d, empty)["allowed"] for d in days],
            "denied": {reason: [self.by_day.get(d, empty)[c] for d in days] for reason, c in REASONS.items()},
        }

    def totals(self) -> dict[str, int]:
        total: Counters = dict.fromkeys(COUNTERS, 0)
        for counters in self.by_day.values():
            _add(total, counters)
        return {"allowed": total["allowed"], "denied": denied(total), **{r: total[c] for r, c in REASONS.items()}}

    def top_scopes(self) -> list[dict[str, Any]]:
        ranked = sorted(self.by_scope.items(), key=lambda item: -denied(item[1]))
        return [
            {"scope": scope or None, "denied": denied(c), "allowed": c["allowed"]}
            for scope, c in ranked[:TOP]
            if denied(c)
        ]

    def top_clients(self) -> list[dict[str, Any]]:
        """The most refused clients, with their subscription's name and plan (one query)."""
        ranked = [(client, c) for client, c in self.by_client.items() if denied(c)]
        ranked.sort(key=lambda item: (-denied(item[1]), item[0]))
        ranked = ranked[:TOP]
        ids = [sub_id for client, _ in ranked if (sub_id := subscription_id(client)) is not None]
        subs = Subscription.objects.select_related("plan").in_bulk(ids) if ids else {}
        out = []
        for client, c in ranked:
            sub = subs.get(subscription_id(client))
            out.append(
                {
                    "client": client,
                    "name": sub.name if sub else client,
                    "plan": sub.plan.name if sub else None,
                    "denied": denied(c),
                    "allowed": c["allowed"],
                    **{reason: c[counter] for reason, counter in REASONS.items()},
                }
            )
        return out


def subscription_id(client: str) -> int | None:
    """The subscription id of a client tag ``s.<id>``, else None."""
    kind, _, ident = client.partition(".")
    return int(ident) if kind == "s" and ident.isdigit() else None


def upgrade_candidates(rules: RuleSet, today: date) -> list[dict[str, Any]]:
    """Subscriptions refused by rate limits or budgets at least UPGRADE_MIN_DENIALS times in the last week.

    Each names the cheapest higher plan whose limit for the most refused scope
    is larger (``RuleSet.upgrade_for``), else the next plan up, and the
    monthly revenue difference. Two queries.
    """
    rows = (
        UsageRecord.objects.filter(day__gte=today - timedelta(days=UPGRADE_DAYS - 1), subscription__isnull=False)
        .order_by()
        .values("subscription_id", "plan_key", "scope")
        .annotate(rate=Sum("denied_rate"), budget=Sum("denied_budget"))
    )
    per_sub: dict[int, dict[str, Any]] = {}
    for row in rows:
        entry = per_sub.setdefault(
            row["subscription_id"], {"denied": 0, "rate": 0, "budget": 0, "scopes": defaultdict(int)}
        )
        entry["denied"] += row["rate"] + row["budget"]
        entry["rate"] += row["rate"]
        entry["budget"] += row["budget"]
        entry["scopes"][(row["plan_key"], row["scope"], row["budget"] > row["rate"])] += row["rate"] + row["budget"]
    wanted = [sub_id for sub_id, e in per_sub.items() if e["denied"] >= UPGRADE_MIN_DENIALS]
    subs = Subscription.objects.select_related("plan").in_bulk(wanted) if wanted else {}
    out = []
    for sub_id in wanted:
        sub = subs.get(sub_id)
        if sub is None:
            continue
        scopes = per_sub[sub_id]["scopes"]
        _, scope, by_budget = max(scopes, key=lambda k: scopes[k])
        target = _upgrade_plan(rules, sub.plan_id, scope, by_budget)
        if target is None:
            continue  # already on the top plan
        out.append(
            {
                "client": f"s.{sub.pk}",
                "name": sub.name,
                "plan": sub.plan.name,
                "denied": per_sub[sub_id]["denied"],
                # Each reason counted, so "5" reads as 3 by rate limits and 2 by budgets, not 5 of one kind.
                "denied_by": {"rate": per_sub[sub_id]["rate"], "budget": per_sub[sub_id]["budget"]},
                "scope": scope or None,
                "because": "budget" if by_budget else "rate limit",
                "upgrade_to": target.name,
                "revenue_difference": api_amount(target.price - sub.plan.monthly_price),
                "revenue_difference_text": format_money(
                    target.price - sub.plan.monthly_price, plan_currency(rules, target.id)
                ),
            }
        )
    out.sort(key=lambda c: -c["denied"])
    return out


def plan_currency(rules: RuleSet, plan_id: int) -> str:
    """The currency a plan's money is in, from the rules (its budgets'), without a query; the budgets' default
    for a plan with none."""
    plan = rules.plans.get(plan_id)
    windows = (w for rule in (plan.limits if plan else ()) for w in rule.windows if w.currency)
    return next((w.currency for w in windows), DEFAULT_CURRENCY)


def _upgrade_plan(rules: RuleSet, plan_id: int, scope: str, by_budget: bool) -> Any:
    plan = rules.plans.get(plan_id)
    if plan is None:
        return None
    for rule in plan.limits:
        if rule.shadow or (rule.algorithm == "budget") != by_budget:
            continue
        if by_budget or rule.scope == scope or not (rule.scope or rule.path_prefix):
            for window in rule.windows:
                found = rules.upgrade_for(plan_id, window)
                if found is not None:
                    return found
    higher = sorted((p for p in rules.plans.values() if p.price > plan.price), key=lambda p: (p.price, p.priority))
    return higher[0] if higher else None


def adaptive_panel() -> dict[str, Any]:
    """Current multiplier per plan (Redis), the signals of the latest change, and the history. Two queries."""
    try:
        current = back_office().multipliers()
        published = True
    except STORE_ERRORS:
        current, published = {}, False
    plans = list(Plan.objects.order_by("monthly_price", "priority").values("id", "name"))
    history = list(AdaptiveSnapshot.objects.order_by("-created_at", "-id")[:HISTORY])
    latest = history[0] if history else None
    # A snapshot is recorded whenever the computed multipliers change, so the latest holds them now; in 'observe'
    # mode they differ from the published ones (1.0 but pins), and the panel shows both.
    computed = latest.multipliers if latest else {}
    return {
        "readable": published,
        "mode": adaptive_settings.MODE,
        "plans": [
            {
                "id": p["id"],
                "name": p["name"],
                "multiplier": current.get(p["id"], 1.0),
                "computed": computed.get(str(p["id"]), 1.0),
            }
            for p in plans
        ],
        "signals": signal_rows(latest.signals) if latest else [],
        "level": latest.level if latest else 1.0,
        "reason": latest.reason if latest else "",
        "history": [
            {
                "at": s.created_at.isoformat(),
                "level": s.level,
                "multipliers": {p["name"]: s.multipliers.get(str(p["id"]), 1.0) for p in plans},
            }
            for s in reversed(history)
        ],
    }


def _group(rows: Any, fields: tuple[str, ...]) -> defaultdict[Any, Counters]:
    groups: defaultdict[Any, Counters] = defaultdict(lambda: dict.fromkeys(COUNTERS, 0))
    for row in rows:
        _add(groups[row[fields[0]] if len(fields) == 1 else tuple(row[f] for f in fields)], row)
    return groups


def _add(total: Counters, counters: dict[str, Any]) -> None:
    for c in COUNTERS:
        total[c] += counters.get(c) or 0


def decorate_standing(standing: dict[str, Any] | None) -> dict[str, Any] | None:
    """Add ``used_pct`` and ``state`` (ok, near, over) to each limit and budget of a standing, for display."""
    if standing is None:
        return None
    for limit in standing["limits"]:
        used = 1 - limit["remaining"] / limit["quota"] if limit["quota"] else 0.0
        limit["used_pct"] = round(used * 100)
        limit["state"] = "over" if limit["remaining"] <= 0 else "near" if used >= NEAR else "ok"
    for budget in standing["budgets"]:
        amount = Decimal(budget["amount"])
        used = float(Decimal(budget["spent"]) / amount) if amount else 0.0
        budget["used_pct"] = round(used * 100)
        budget["state"] = "over" if Decimal(budget["remaining"]) <= 0 else "near" if used >= NEAR else "ok"
    return standing


def refusal_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table row per refusing window of each refusal (one row for a ban or an access-list denial)."""
    rows = []
    for record in records:
        base = {"time": record["time"], "reason": record.get("reason"), "scope": record.get("scope")}
        if record.get("acl_entry") is not None:
            base["note"] = f"access-list entry {record['acl_entry']}"
        elif record.get("ban_until") is not None:
            ends = datetime.fromtimestamp(record["ban_until"], UTC).isoformat(timespec="seconds")
            base["note"] = f"banned until {ends}"
        windows = record.get("windows") or [{"retry_after": record.get("retry_after")}]
        for window in windows:
            length = window.get("window")  # seconds, or a calendar period's name
            rows.append({**base, **window, "window": f"{length} s" if isinstance(length, int) else length})
    return rows
