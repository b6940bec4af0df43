"""A key's own limits (a lower rate, a spending cap), set by the subscription's owners: the one implementation
the API and the page call. The engine counts them besides the plan's limits, in the same decision
(:func:`plans.rules.key_rules`), so a key can be held below its subscription and never above it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from rest_framework.request import Request

from plans.models import APIKey

from . import audit
from .access import Account
from .caps import money
from .keys import key_of


def limits_of(key: APIKey) -> dict[str, Any]:
    """The key's own limits as the API shows them."""
    cap = {"period": key.cap_period, "amount": money(key.cap_amount)} if key.cap_period else None
    return {"own_rates": key.own_rates, "cap": cap}


def set_key_limits(
    request: Request | HttpRequest,
    account: Account,
    key_id: int,
    *,
    own_rates: str,
    cap_period: str = "",
    cap_amount: Decimal | None = None,
) -> APIKey:
    """Give key ``key_id`` of the subscription its own rates (``""``: none) and spending cap (no period: none),
    checked, saved and audited in one transaction with the key's row locked; the key, as it now is. Raises
    :class:`~console.errors.Missing` for a key of no subscription of the caller's, and ``ValidationError``
    naming the model's field (``own_rates``, ``cap_period``, ``cap_amount``)."""
    with transaction.atomic():
        key = key_of(account, key_id, lock=True)
        before = limits_of(key)
        key.own_rates, key.cap_period, key.cap_amount = own_rates.strip(), cap_period, cap_amount
        key.clean_own_limits()
        key.save(update_fields=["own_rates", "cap_period", "cap_amount"])
        audit.record(request, account, "key.limits", key.prefix, name=key.name, now=limits_of(key), was=before)
    return key
