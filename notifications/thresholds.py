"""A customer's own alert thresholds (:class:`plans.models.AlertThresholds`): recorded as the spend crosses them,
and found by looking where no spend crossed them.

The rules snapshot gives a subscription's thresholds to each of its money limits (a plan's budget, its cap, a
key's own cap: ``Window.alerts``), and the engine judges them where it judges the platform's 80 % and 100 %:
when a request's spend is settled (or an allowance's spend committed, or owed spend charged), from the spend
before and after. It sends ``quotas.signals.spend_threshold_reached`` with the platform's alerts of the same
settlement, in the order of their percents, and :func:`record_crossing` records it as a
``spend.threshold_reached`` event: so a customer's 50 % comes before the platform's 100 % it preceded.

An event is recorded once per limit (its id: two plans' budgets named ``day-budget`` are two limits, a cap
lowering a budget shares the budget's), name (the cap, or the budget it lowers: the two amounts mean different
things to an owner, what it allowed itself and what it pays for), period and threshold: its ``dedupe_key`` names
all of them. A period is named as the ledger counts it, by its end as the store reports it (on the decision's
clock, not this host's); one the ledger carries over (``BUDGET_TIME_ZONE`` moved: a period ending within half a
period of one already reported is the same one, as period.lua counts it) is not reported again.

The watcher (:func:`threshold_findings`, from :func:`notifications.watch.watch` about once a minute) finds what
no spend crossed: a threshold set, or a cap lowered, after the period's spend had passed it. It reads each such
subscription's spending in peek mode, which counts nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone

from plans.models import AlertThresholds, Subscription
from plans.models.caps import budget_of
from plans.rules import subscriber_of
from quotas import api
from quotas.formats.money import api_amount, from_micros
from quotas.formats.periods import period_bounds
from quotas.internal_api import STORE_ERRORS, rules_snapshot
from quotas.settings import quota_settings

from .events import SPEND_THRESHOLD
from .models import Event
from .record import record_quietly

Finding = tuple[str, Subscription, str, dict[str, Any]]


def record_crossing(*, client_tag: str, subscription_id: int | None, **sent: Any) -> None:
    """``quotas.signals.spend_threshold_reached`` (its keyword arguments): a ``spend.threshold_reached`` event,
    once per limit, name, period and threshold (a database failure is logged: the request goes on)."""
    if subscription_id is None:
        return
    subscription = Subscription.objects.filter(pk=subscription_id).select_related("plan").first()
    if subscription is None:
        return  # deleted meanwhile
    limit, name, period, percent = sent["limit"], sent["budget"], sent["period"], sent["threshold"]
    end = sent["period_end"].timestamp()
    if _seen(_reported(subscription, client_tag, limit, name), period, end, percent):
        return
    data = _data(
        subscription, name=name, period=period, percent=percent, end=end, spent=from_micros(sent["spent_micros"]),
        amount=from_micros(sent["amount_micros"]), currency=sent["currency"],
    )  # fmt: skip
    if sent.get("period_start") is not None:  # the engine's: a billing month's by its anchor day
        data["period_start"] = sent["period_start"].isoformat()
    if limit.startswith("kc"):  # a key's own cap: named by the key (the first of its rolls)
        data["key"] = {"id": int(limit[2:])}
    record_quietly(SPEND_THRESHOLD, subscription, dedupe_key(client_tag, limit, name, end, percent), data,
                   timezone.now())  # fmt: skip


def dedupe_key(tag: str, limit: str, name: str, end: float, percent: int) -> str:
    """The ``dedupe_key`` of a threshold event: client, limit, name, period (its end) and percent."""
    return f"{SPEND_THRESHOLD}:{tag.strip('{}')}:{limit}:{name}:{int(end)}:{percent}"


def threshold_findings() -> list[Finding]:
    """Every (subscription, limit, period, threshold) reached now by a subscription with thresholds, not recorded
    yet (the store's clock says when now is)."""
    found: list[Finding] = []
    watched = AlertThresholds.objects.filter(subscription__is_active=True).select_related("subscription__plan")
    for thresholds in watched:
        if thresholds.percents:
            found += _reached(thresholds.subscription, sorted(thresholds.percents))
    return found


def _reached(subscription: Subscription, percents: list[int]) -> list[Finding]:
    subscriber = subscriber_of(subscription)
    client = api.Client.of_subscription(subscriber)
    tag = client.tag.strip("{}")
    try:
        budgets = api.standing(client)["budgets"]
    except STORE_ERRORS:
        return []  # Redis away: the next look sees the same spending, as the period has not ended
    # Each money window's limit id, by its name (the standing names windows as their RateLimit policy).
    limits = {
        w.policy: w.limit_id
        for rule in rules_snapshot().limits_for(subscription.plan_id, subscriber)
        if rule.algorithm == "budget"
        for w in rule.windows
    }
    found: list[Finding] = []
    for budget in budgets:
        spent, limit = Decimal(budget["spent"]), limits.get(budget["name"], "")
        end = datetime.fromisoformat(budget["resets_at"]).timestamp()  # the ledger's period: its end
        amounts = [(budget["name"], Decimal(budget["amount"]))]
        lowered = budget_of(subscription, budget["period"])
        if lowered is not None and lowered.amount > amounts[0][1]:  # a cap: the budget it lowers too
            amounts.append((lowered.name, lowered.amount))
        for name, amount in amounts:
            sent = _reported(subscription, tag, limit, name)
            for percent in percents:
                if amount > 0 and spent * 100 >= amount * percent and not _seen(sent, budget["period"], end, percent):
                    data = _data(subscription, name=name, period=budget["period"], percent=percent, end=end,
                                 spent=spent, amount=amount, currency=budget["currency"])  # fmt: skip
                    found.append((SPEND_THRESHOLD, subscription, dedupe_key(tag, limit, name, end, percent), data))
    return found


def _data(
    subscription: Subscription, *, name: str, period: str, percent: int, end: float, spent: Decimal,
    amount: Decimal, currency: str,
) -> dict[str, Any]:  # fmt: skip
    """A threshold event's data (docs/notifications.md)."""
    bounds = period_bounds(period, end - 1, str(quota_settings.BUDGET_TIME_ZONE))
    return {
        "subscription": {"id": subscription.pk, "name": subscription.name, "plan": subscription.plan.slug},
        "budget": name, "period": period, "threshold": percent,
        "period_start": datetime.fromtimestamp(bounds.start, UTC).isoformat(),
        "spent": api_amount(spent), "amount": api_amount(amount), "currency": currency,
    }  # fmt: skip


def _seen(sent: list[tuple[float, int]], period: str, end: float, percent: int) -> bool:
    """Whether ``percent`` of the period ending at ``end`` is among ``sent``: under that end, or another within half
    a period of it (the same period, as the ledger carries it over when ``BUDGET_TIME_ZONE`` moves)."""
    bounds = period_bounds(period, end - 1, str(quota_settings.BUDGET_TIME_ZONE))
    half = (bounds.end - bounds.start) / 2
    return any(p == percent and abs(e - end) < half for e, p in sent)


def _reported(subscription: Subscription, tag: str, limit: str, name: str) -> list[tuple[float, int]]:
    """The (period end, threshold) of each threshold event already recorded for limit ``limit`` named ``name``
    of client ``tag``."""
    prefix = dedupe_key(tag, limit, name, 0, 0).removesuffix("0:0")
    keys = Event.objects.filter(subscription=subscription, dedupe_key__startswith=prefix).values_list(
        "dedupe_key", flat=True
    )
    found = []
    for key in keys:
        end, _, percent = key[len(prefix) :].partition(":")
        if end.isdigit() and percent.isdigit():
            found.append((float(end), int(percent)))
    return found
