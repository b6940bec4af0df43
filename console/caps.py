"""Setting a subscription's caps and thresholds: the one implementation the API and the page both call.

Each function checks what it is given (Django's ``ValidationError``, naming the field), changes the rows and
writes the audit entry in one transaction.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from rest_framework.request import Request

from plans.models import AlertThresholds, CostBudget, SpendCap
from plans.models.caps import budget_of, plan_currency, validate_percents

from . import audit
from .access import Account

#: The periods a cap may be set for: a budget's.
PERIODS = tuple(CostBudget.BudgetPeriod.values)


def caps_of(account: Account) -> dict[str, Any]:
    """Each budget period of the subscription (the budget in force, its currency, the customer's cap), and its
    alert thresholds."""
    caps = {c.period: c.amount for c in SpendCap.objects.filter(subscription=account.subscription)}
    periods = []
    for period in PERIODS:
        budget = budget_of(account.subscription, period)
        if budget is None and period not in caps:
            continue
        periods.append(
            {
                "period": period,
                "budget": money(budget.amount) if budget else None,
                "currency": budget.currency if budget else plan_currency(account.subscription.plan_id),
                "cap": money(caps[period]) if period in caps else None,
                # No budget of the period (the plan changed): the cap is enforced as a budget of its own.
                "cap_alone": budget is None,
            }
        )
    thresholds = AlertThresholds.objects.filter(subscription=account.subscription).first()
    return {"periods": periods, "thresholds": thresholds.percents if thresholds else []}


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
    """An amount as the API shows it: no trailing zeros (``0.05``, ``1``)."""
    return None if amount is None else f"{amount.normalize():f}"


__all__ = ["PERIODS", "caps_of", "money", "remove_cap", "set_cap", "set_thresholds"]
