"""Setting a subscription's caps and thresholds: the one implementation the API and the page both call.

Each function checks what it is given (Django's ``ValidationError``, naming the field), changes the rows and
writes the audit entry in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from rest_framework.request import Request

from plans.models import AlertThresholds, CostBudget, SpendCap
from plans.models.caps import budget_of, plan_currency, validate_percents
from quotas.formats.money import api_amount

from . import audit
from .access import Account
from .spend import Spend, period_spend

#: The periods a cap may be set for: a budget's.
PERIODS = tuple(CostBudget.BudgetPeriod.values)


@dataclass(frozen=True, slots=True)
class Period:
    """A budget period of a subscription: the budget in force (None: the plan has none, the cap holds alone),
    the customer's cap, their currency and, when read, the period's spend (None: the ledger could not be
    read, or it was not asked for)."""

    period: str
    budget: Decimal | None
    cap: Decimal | None
    currency: str
    spend: Spend | None

    @property
    def enforced(self) -> Decimal | None:
        """The amount the decision enforces: the cap when one is set, else the budget."""
        return self.cap if self.cap is not None else self.budget


def periods_of(account: Account, *, spend: bool = True) -> list[Period]:
    """Each budget period of the subscription, with (``spend``) what it spent, read from the ledger by one peek
    that counts nothing."""
    caps = {c.period: c.amount for c in SpendCap.objects.filter(subscription=account.subscription)}
    spent = period_spend(account.subscription) if spend else None
    periods = []
    for period in PERIODS:
        budget = budget_of(account.subscription, period)
        if budget is None and period not in caps:
            continue
        currency = budget.currency if budget else plan_currency(account.subscription.plan_id)
        periods.append(
            Period(period, budget.amount if budget else None, caps.get(period), currency, (spent or {}).get(period))
        )
    return periods


def caps_of(account: Account, *, spend: bool = True) -> dict[str, Any]:
    """Each budget period of the subscription (the budget in force, its currency, the customer's cap and, with
    ``spend``, what the period spent of the amount enforced: :func:`spend_fields`), and its alert thresholds."""
    periods = []
    for p in periods_of(account, spend=spend):
        row = {
            "period": p.period,
            "budget": money(p.budget),
            "currency": p.currency,
            "cap": money(p.cap),
            # No budget of the period (the plan changed): the cap is enforced as a budget of its own.
            "cap_alone": p.budget is None,
        }
        periods.append({**row, **spend_fields(p.spend)} if spend else row)
    thresholds = AlertThresholds.objects.filter(subscription=account.subscription).first()
    return {"periods": periods, "thresholds": thresholds.percents if thresholds else []}


def spend_fields(spend: Spend | None, amount: Decimal | None = None) -> dict[str, Any]:
    """The API's members of a window's spend against ``amount`` (by default the amount the decision enforces:
    the cap when one is set, else the budget): ``spent``, ``remaining``, ``resets_at`` (ISO 8601, UTC) and
    ``state`` (``ok``, ``near`` from 80 %, ``reached``), each None when the ledger could not be read."""
    if spend is None:
        return dict.fromkeys(("spent", "remaining", "resets_at", "state"))
    amount = spend.amount if amount is None else amount
    return {
        "spent": money(spend.spent),
        "remaining": money(spend.remaining_of(amount)),
        "resets_at": spend.resets_at.isoformat(),
        "state": spend.state_of(amount),
    }


def set_cap(request: Request | HttpRequest, account: Account, period: str, amount: Decimal) -> SpendCap:
    """Set (or change) the cap of ``period``; at most the period's budget."""
    with transaction.atomic():
        cap = SpendCap.objects.select_for_update().filter(subscription=account.subscription, period=period).first()
        before = cap.amount if cap else None
        cap = cap or SpendCap(subscription=account.subscription, period=period)
        cap.amount = amount
        cap.clean()
        cap.save()
        audit.record(request, account, "cap.set", period, amount=money(cap.amount), was=money(before))
    return cap


def remove_cap(request: Request | HttpRequest, account: Account, period: str) -> bool:
    """Remove the cap of ``period``; False when none was set."""
    with transaction.atomic():
        deleted, _ = SpendCap.objects.filter(subscription=account.subscription, period=period).delete()
        if deleted:
            audit.record(request, account, "cap.remove", period)
    return bool(deleted)


def set_thresholds(request: Request | HttpRequest, account: Account, percents: Any) -> list[int]:
    """Set the alert thresholds (whole percentages, 1 to 100); the sorted list kept."""
    kept = validate_percents(percents)
    with transaction.atomic():
        AlertThresholds.objects.update_or_create(subscription=account.subscription, defaults={"percents": kept})
        audit.record(request, account, "thresholds.set", "", percents=kept)
    return kept


def money(amount: Decimal | None) -> str | None:
    """An amount as the API writes money (:func:`~quotas.formats.money.api_amount`: ``"0.050000"``), or None."""
    return None if amount is None else api_amount(amount)


__all__ = [
    "PERIODS",
    "Period",
    "caps_of",
    "money",
    "periods_of",
    "remove_cap",
    "set_cap",
    "set_thresholds",
    "spend_fields",
]
