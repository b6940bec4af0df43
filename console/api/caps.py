"""A subscription's own spending caps and alert thresholds:

- ``GET  subscriptions/<id>/caps``: each budget period with its amount, currency, the cap set on it and what it
  spent of the amount enforced (``spent``, ``remaining``, ``resets_at``, ``state``), read from the ledger by a
  peek that counts nothing;
- ``PUT  subscriptions/<id>/caps/<day|month>`` ``{"amount": "5.00"}``: set (or change) the period's cap;
- ``DELETE subscriptions/<id>/caps/<day|month>``: remove it;
- ``GET/PUT subscriptions/<id>/thresholds`` ``{"percents": [50, 75, 90]}``: the alert thresholds.

A cap lowers the budget of its period in the same decision that enforces the budget, and refuses with its own
reason (``spend_cap_reached``); it can never raise it (:class:`plans.models.SpendCap`).
"""

from __future__ import annotations

from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from .. import caps, fields, spend
from .base import ConsoleView


class CapSerializer(serializers.Serializer):
    amount = serializers.DecimalField(**fields.CAP_AMOUNT)


class ThresholdsSerializer(serializers.Serializer):
    percents = serializers.ListField(child=serializers.IntegerField(**fields.PERCENT), **fields.THRESHOLDS)


class PeriodSerializer(serializers.Serializer):
    period = serializers.ChoiceField(choices=list(caps.PERIODS))
    budget = serializers.CharField(allow_null=True, help_text="The budget in force (the subscription's or its plan's).")
    currency = serializers.CharField(allow_null=True)
    cap = serializers.CharField(allow_null=True, help_text="The subscription's own cap; null: none.")
    cap_alone = serializers.BooleanField(
        help_text="True when the plan has no budget of the period: the cap is enforced as a budget of its own."
    )
    spent = serializers.CharField(
        allow_null=True,
        help_text="What the period spent so far, as the ledger counts it (read without counting anything); null "
        "while it cannot be read.",
    )
    remaining = serializers.CharField(
        allow_null=True, help_text="What is left of the amount enforced: the cap when one is set, else the budget."
    )
    resets_at = serializers.DateTimeField(
        allow_null=True, help_text="When the period ends and its spend starts again from zero (UTC)."
    )
    state = serializers.ChoiceField(
        choices=list(spend.STATES),
        allow_null=True,
        help_text="Of the amount enforced: ok, near (80 % spent or more) or reached (nothing left).",
    )


class CapsSerializer(serializers.Serializer):
    periods = PeriodSerializer(many=True)
    thresholds = serializers.ListField(child=serializers.IntegerField())


class CapsView(ConsoleView):
    """The subscription's budgets with their caps, and its alert thresholds (owners, members, its keys)."""

    serializer_class = CapsSerializer

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response(caps.caps_of(self.account))


class CapView(ConsoleView):
    """Set or remove the cap of one budget period (owners)."""

    serializer_class = CapSerializer

    def put(self, request: Request, subscription_id: int, period: str) -> Response:
        account = self.account
        _known(period)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        caps.set_cap(request, account, period, serializer.validated_data["amount"])  # a 400 naming the field
        return Response(caps.caps_of(account))

    def delete(self, request: Request, subscription_id: int, period: str) -> Response:
        account = self.account
        _known(period)
        if not caps.remove_cap(request, account, period):
            raise exceptions.NotFound(f"No {period} cap is set.")
        return Response(caps.caps_of(account))


class ThresholdsView(ConsoleView):
    """The subscription's own alert thresholds: read (owners, members, its keys), set (owners)."""

    serializer_class = ThresholdsSerializer

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response({"percents": caps.caps_of(self.account, spend=False)["thresholds"]})

    def put(self, request: Request, subscription_id: int) -> Response:
        account = self.account
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        kept = caps.set_thresholds(request, account, serializer.validated_data["percents"])
        return Response({"percents": kept})


def _known(period: str) -> None:
    if period not in caps.PERIODS:
        raise exceptions.NotFound(f"No such budget period {period!r}: use one of {', '.join(caps.PERIODS)}.")
