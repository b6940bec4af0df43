"""A customer's own alert thresholds (:class:`plans.models.AlertThresholds`), found by looking.

The platform's alerts at 80 % and 100 % of a budget are reported by the decision itself (the script keeps the
level reached with the budget's state). A customer's thresholds are its own choice, any whole percentages, so
the watcher (:func:`notifications.watch.watch`, about once a minute) reads each such subscription's spending in
peek mode, which counts nothing, and records a ``spend.threshold_reached`` event per threshold reached, once per
budget (or cap), period and threshold: the event's ``dedupe_key`` names all four. A capped period is watched
twice: against the cap, which is the window the decision enforces, and against the plan's budget the cap
lowers, as the two amounts mean different things to an owner (what it allowed itself, and what it pays for).

A period is named as the ledger counts it: by its end as the store reports it (the budget's ``resets_at``, on
the decision's clock, not this host's), so a look at midnight with the host past it and Redis not files the
spend under the day it belongs to. And a period the ledger carries over (``BUDGET_TIME_ZONE`` moved: a period
ending within half a period of one already reported is the same one, as period.lua counts it) is not reported
again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from plans.models import AlertThresholds, Subscription
from plans.models.caps import budget_of
from plans.rules import subscriber_of
from quotas import api
from quotas.formats.money import api_amount
from quotas.formats.periods import period_bounds
from quotas.internal_api import STORE_ERRORS
from quotas.settings import quota_settings

from .events import SPEND_THRESHOLD
from .models import Event

Finding = tuple[str, Subscription, str, dict[str, Any]]


def threshold_findings(now: datetime) -> list[Finding]:
    """Every (subscription, budget, period, threshold) reached at ``now`` by a subscription with thresholds."""
    found: list[Finding] = []
    watched = AlertThresholds.objects.filter(subscription__is_active=True).select_related("subscription__plan")
    for thresholds in watched:
        if thresholds.percents:
            found += _reached(thresholds.subscription, sorted(thresholds.percents), now)
    return found


def _reached(subscription: Subscription, percents: list[int], now: datetime) -> list[Finding]:
    client = api.Client.of_subscription(subscriber_of(subscription))
    tag = client.tag.strip("{}")
    try:
        budgets = api.standing(client)["budgets"]
    except STORE_ERRORS:
        return []  # Redis away: the next look sees the same spending, as the period has not ended
    who = {"id": subscription.pk, "name": subscription.name, "plan": subscription.plan.slug}
    found: list[Finding] = []
    for budget in budgets:
        spent = Decimal(budget["spent"])
        end = datetime.fromisoformat(budget["resets_at"]).timestamp()  # the ledger's period: its end
        bounds = period_bounds(budget["period"], end - 1, str(quota_settings.BUDGET_TIME_ZONE))
        period_start = datetime.fromtimestamp(bounds.start, UTC).isoformat()
        half = (bounds.end - bounds.start) / 2
        amounts = [(budget["name"], Decimal(budget["amount"]))]
        lowered = budget_of(subscription, budget["period"])
        if lowered is not None and lowered.amount > amounts[0][1]:  # a cap: the budget it lowers too
            amounts.append((lowered.name, lowered.amount))
        for name, amount in amounts:
            sent = _reported(subscription, tag, name)
            for percent in percents:
                if any(p == percent and abs(e - end) < half for e, p in sent):
                    continue  # this period, as the ledger counts it, reported it under another name of its end
                if amount > 0 and spent * 100 >= amount * percent:
                    data = {
                        "subscription": who, "budget": name, "period": budget["period"], "threshold": percent,
                        "period_start": period_start, "spent": api_amount(spent), "amount": api_amount(amount),
                        "currency": budget["currency"],
                    }  # fmt: skip
                    key = f"{SPEND_THRESHOLD}:{tag}:{name}:{int(end)}:{percent}"
                    found.append((SPEND_THRESHOLD, subscription, key, data))
    return found


def _reported(subscription: Subscription, tag: str, name: str) -> list[tuple[float, int]]:
    """The (period end, threshold) of each threshold event already recorded for ``name`` of client ``tag``."""
    prefix = f"{SPEND_THRESHOLD}:{tag}:{name}:"
    keys = Event.objects.filter(subscription=subscription, dedupe_key__startswith=prefix).values_list(
        "dedupe_key", flat=True
    )
    found = []
    for key in keys:
        end, _, percent = key[len(prefix) :].partition(":")
        if end.isdigit() and percent.isdigit():
            found.append((float(end), int(percent)))
    return found
