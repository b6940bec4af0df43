"""``GET/PUT subscriptions/<id>/keys/<key_id>/limits``: a key's own rate and spending cap.

``PUT {"own_rates": "10/min; 1000/day", "cap": {"period": "day", "amount": "1.00"}}`` (owners): the key is
held to these besides its plan's limits (``""`` and ``null`` remove them). A request over the key's rate is
refused as any rate limit is (its policy ``key-rate``); over its cap, with the reason ``key_cap_reached``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from plans.models import APIKey

from .. import caps, fields, spend
from ..key_limits import limits_of, set_key_limits
from ..keys import key_of
from .base import ConsoleView


class KeyCapSerializer(serializers.Serializer):
    period = serializers.ChoiceField(choices=fields.KEY_CAP_PERIODS)
    amount = serializers.DecimalField(**fields.KEY_CAP_AMOUNT)
    # What the answers add: the cap's spend in its current period, read from the ledger without counting.
    spent = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text="What the key spent in the cap's period; null: unreadable now, or the key is revoked.",
    )
    remaining = serializers.CharField(read_only=True, allow_null=True, help_text="What is left of the cap.")
    resets_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text="When the period ends (UTC).")
    state = serializers.ChoiceField(
        choices=list(spend.STATES), read_only=True, allow_null=True,
        help_text="ok, near (80 % spent or more) or reached (nothing left).",
    )  # fmt: skip


class KeyLimitsSerializer(serializers.Serializer):
    own_rates = serializers.CharField(
        allow_blank=True, help_text='e.g. "10/min; 1000/day"; "": none.', **fields.OWN_RATES
    )
    cap = KeyCapSerializer(allow_null=True, required=False, default=None, help_text="null: no cap of its own.")


class KeyLimitsView(ConsoleView):
    """A key's own limits: read (owners, members, the subscription's keys), set (owners)."""

    serializer_class = KeyLimitsSerializer

    def get(self, request: Request, subscription_id: int, key_id: int) -> Response:
        return Response(_with_spend(key_of(self.account, key_id)))

    def put(self, request: Request, subscription_id: int, key_id: int) -> Response:
        account = self.account
        key_of(account, key_id)  # another subscription's key: 404 before the body is read
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        given = serializer.validated_data
        cap = given.get("cap") or {}
        try:
            key = set_key_limits(request, account, key_id, own_rates=given["own_rates"],
                                 cap_period=cap.get("period", ""), cap_amount=cap.get("amount"))  # fmt: skip
        except ValidationError as exc:
            raise exceptions.ValidationError(_fields(exc.message_dict)) from None
        return Response(_with_spend(key))


def _with_spend(key: APIKey) -> dict[str, Any]:
    """The key's limits with its cap's spend (:func:`console.caps.spend_fields`; a revoked key spends nothing)."""
    limits = limits_of(key)
    if limits["cap"] is not None:
        spent = spend.key_spend(key.subscription, [key])
        limits["cap"].update(caps.spend_fields(spent.get(key.pk) if spent is not None else None))
    return limits


def _fields(errors: dict[str, list[str]]) -> dict[str, list[str]]:
    # The model's field names, as this API names them.
    names = {"cap_period": "cap.period", "cap_amount": "cap.amount", "__all__": "non_field_errors"}
    return {names.get(name, name): messages for name, messages in errors.items()}
