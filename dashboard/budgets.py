"""The overview's "Budgets near or over" panel, read live from the ledger.

Each recently used API key's budgets (its plan's, its subscription's own, the
customer's caps and the key's own cap) are peeked in Redis, as the client's
own usage page reads them: nothing is counted or consumed. A budget shows once
its spend reaches :data:`~quotas.internal_api.NEAR` of its amount, whether or
not an alert row was ever written (an alert is only recorded by the usage app,
so spend from before it was installed, or from a period whose alert was lost,
still shows). When Redis cannot be read, the alert rows are shown instead.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, Q
from django.utils import timezone

from plans.models import APIKey
from quotas import api
from quotas.api import Client
from quotas.formats.money import api_amount, format_money
from quotas.internal_api import NEAR, STORE_ERRORS, back_office, client_tag, subscriber_for_key
from usage.models import BudgetAlert

#: Rows the panel shows at most, the fullest first.
ROWS = 20
#: Keys whose budgets are read, the most recently used first: one peek (one Redis call) each, so the
#: panel's cost is bounded whatever the number of customers (the keys spending now are the ones whose
#: budgets move). Each key's subscriber comes from the rules cache, as the throttle's does: the first read
#: after a rules change costs up to four queries a key not cached yet, later reads none.
KEYS_READ = 50


def budget_panel(today: date) -> list[dict[str, Any]]:
    """Budgets at or above ``NEAR`` of their amount now, one row per client and budget, fullest first;
    from the alert rows (:func:`alert_rows`) when Redis cannot be read."""
    try:
        used = back_office().keys_last_used()
        keys = _recent_keys(used)
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for key in keys:
            for row in _key_rows(key):
                rows.setdefault((row["client"], row["budget"]), row)
    except STORE_ERRORS:
        return alert_rows(today)
    return sorted(rows.values(), key=lambda r: -r["used"])[:ROWS]


def _recent_keys(used: dict[int, float]) -> list[APIKey]:
    """The live (unrevoked) keys used most recently, in one query: by Redis's notes of key use, else by the
    last use the usage flush copied to the database (for keys Redis no longer notes)."""
    newest = sorted(used, key=lambda pk: -used[pk])[:KEYS_READ]
    keys = (
        APIKey.objects.filter(revoked_at__isnull=True)
        .filter(Q(pk__in=newest) | Q(last_used_at__isnull=False))
        .select_related("subscription__plan")
        .order_by(F("last_used_at").desc(nulls_last=True))[: KEYS_READ * 2]
    )

    def last_use(key: APIKey) -> float:
        return max(used.get(key.pk, 0.0), key.last_used_at.timestamp() if key.last_used_at else 0.0)

    return sorted(keys, key=last_use, reverse=True)[:KEYS_READ]


def _key_rows(key: APIKey) -> list[dict[str, Any]]:
    subscriber = subscriber_for_key(key.key_hash)
    if subscriber is None:
        return []
    sub = key.subscription
    tag = client_tag("s", str(sub.pk))
    standing = api.standing(Client("subscription", str(sub.pk), tag, subscriber))
    rows = []
    for budget in standing["budgets"]:
        amount, spent = Decimal(budget["amount"]), Decimal(budget["spent"])
        used = float(spent / amount) if amount else 0.0
        if used < NEAR:
            continue
        rows.append(
            {
                "client": standing["client"],
                "name": sub.name,
                "plan": sub.plan.name,
                "budget": budget["name"],
                "threshold": 100 if used >= 1 else round(NEAR * 100),
                "used": used,
                "spent": budget["spent"],
                "amount": budget["amount"],
                "spent_text": format_money(spent, budget["currency"]),
                "amount_text": format_money(amount, budget["currency"]),
                "over": used >= 1,
                "resets_at": budget["resets_at"],
            }
        )
    return rows


def alert_rows(today: date) -> list[dict[str, Any]]:
    """The budgets near or over as their alert rows record them (used when Redis cannot be read): one row per
    budget (client, budget and period) of the last 31 days, in its latest state (over once its 100 % alert
    came, else near), newest first."""
    since = timezone.now() - timedelta(days=31)
    alerts = BudgetAlert.objects.filter(period_start__gte=since).select_related("subscription__plan")
    latest: dict[tuple[str, str, datetime], BudgetAlert] = {}
    for alert in alerts.order_by("-created_at", "-threshold")[: ROWS * 2]:  # both thresholds of ROWS budgets
        key = (alert.client, alert.budget, alert.period_start)
        if key not in latest or alert.threshold > latest[key].threshold:
            latest[key] = alert
    return [
        {
            "client": a.client,
            "name": a.subscription.name if a.subscription else a.client,
            "plan": a.subscription.plan.name if a.subscription else None,
            "budget": a.budget,
            "threshold": a.threshold,
            "used": float(a.spent / a.amount) if a.amount else 0.0,
            "spent": api_amount(a.spent),
            "amount": api_amount(a.amount),
            "spent_text": format_money(a.spent),
            "amount_text": format_money(a.amount),
            "over": a.threshold >= BudgetAlert.Threshold.EXHAUSTED,
            "resets_at": None,
            "period_start": a.period_start.date().isoformat(),
        }
        for a in list(latest.values())[:ROWS]
    ]
