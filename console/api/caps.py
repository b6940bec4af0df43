"""A subscription's own spending caps and alert thresholds:

- ``GET  subscriptions/<id>/caps``: each budget period with its amount, currency and the cap set on it;
- ``PUT  subscriptions/<id>/caps/<day|month>`` ``{"amount": "5.00"}``: set (or change) the period's cap;
- ``DELETE subscriptions/<id>/caps/<day|month>``: remove it;
- ``GET/PUT subscriptions/<id>/thresholds`` ``{"percents": [50, 75, 90]}``: the alert thresholds.

A cap lowers the budget of its period in the same decision that enforces the budget, and refuses with its own
reason (``spend_cap_reached``); it can never raise it (:class:`plans.models.SpendCap`).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as ModelValidationError
from django.db import transaction
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from plans.models import AlertThresholds, CostBudget, SpendCap
from plans.models.caps import budget_of, validate_percents

from .. import audit
from ..access import Account
from .base import ConsoleView

PERIODS = tuple(CostBudget.BudgetPeriod.values)


class CapSerializer(serializers.Serializer):
    amount = serializers.DecimalField(max_digits=14, decimal_places=6, min_value=0)


class ThresholdsSerializer(serializers.Serializer):
    percents = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=100), max_length=10)


def caps_of(account: Account) -> dict[str, Any]:
    """Each budget period of the subscription: the budget in force, its currency and the customer's cap."""
    caps = {c.period: c.amount for c in SpendCap.objects.filter(subscription=account.subscription)}
    periods = []
    for period in PERIODS:
        budget = budget_of(account.subscription, period)
        if budget is None and period not in caps:
            continue
        periods.append(
            {
                "period": period,
                "budget": _money(budget.amount) if budget else None,
                "currency": budget.currency if budget else None,
                "cap": _money(caps[period]) if period in caps else None,
            }
        )
    thresholds = AlertThresholds.objects.filter(subscription=account.subscription).first()
    return {"periods": periods, "thresholds": thresholds.percents if thresholds else []}


class CapsView(ConsoleView):
    """The subscription's budgets with their caps, and its alert thresholds (owners, members, its keys)."""

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response(caps_of(self.account()))


class CapView(ConsoleView):
    """Set or remove the cap of one budget period (owners)."""

    serializer_class = CapSerializer

    def put(self, request: Request, subscription_id: int, period: str) -> Response:
        account = self.owner()
        _known(period)
        data = self._valid(request)
        with transaction.atomic():
            cap = SpendCap.objects.select_for_update().filter(subscription=account.subscription, period=period).first()
            before = cap.amount if cap else None
            cap = cap or SpendCap(subscription=account.subscription, period=period)
            cap.amount = data["amount"]
            _clean(cap)
            cap.save()
            audit.record(request, account, "cap.set", period, amount=_money(cap.amount), was=_money(before))
        return Response(caps_of(account))

    def delete(self, request: Request, subscription_id: int, period: str) -> Response:
        account = self.owner()
        _known(period)
        with transaction.atomic():
            deleted, _ = SpendCap.objects.filter(subscription=account.subscription, period=period).delete()
            if not deleted:
                raise exceptions.NotFound(f"No {period} cap is set.")
            audit.record(request, account, "cap.remove", period)
        return Response(caps_of(account))

    def _valid(self, request: Request) -> dict[str, Any]:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


class ThresholdsView(ConsoleView):
    """The subscription's own alert thresholds: read (owners, members, its keys), set (owners)."""

    serializer_class = ThresholdsSerializer

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response({"percents": caps_of(self.account())["thresholds"]})

    def put(self, request: Request, subscription_id: int) -> Response:
        account = self.owner()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            percents = validate_percents(serializer.validated_data["percents"])
        except ModelValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from None
        with transaction.atomic():
            AlertThresholds.objects.update_or_create(subscription=account.subscription, defaults={"percents": percents})
            audit.record(request, account, "thresholds.set", "", percents=percents)
        return Response({"percents": percents})


def _known(period: str) -> None:
    if period not in PERIODS:
        raise exceptions.NotFound(f"No such budget period {period!r}: use one of {', '.join(PERIODS)}.")


def _clean(cap: SpendCap) -> None:
    try:
        cap.clean()
    except ModelValidationError as exc:
        raise exceptions.ValidationError(exc.message_dict) from None


def _money(amount: Any) -> str | None:
    return None if amount is None else f"{amount.normalize():f}"
