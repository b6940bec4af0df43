"""What a subscription has spent of each budget, cap and key cap in the current period, read from the ledger.

Every figure comes from one peek of the subscription's windows (:func:`quotas.api.standing`), which consumes and
counts nothing, as the usage page and the alert watcher read them: the page and ``GET .../caps`` show what the
decision itself would enforce, never a second count kept beside it. A cap lowers its budget's window (the same
counter), so a capped period has one spend, measured against two amounts: the cap (what the decision enforces)
and the budget it lowers (what the plan pays for).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from plans.models import APIKey, Subscription
from plans.rules import key_rules, subscriber_of
from quotas import api
from quotas.internal_api import NEAR, STORE_ERRORS

#: The states of a budget's spend: below NEAR of its amount, at or above it, or at its amount.
OK, NEAR_STATE, REACHED = "ok", "near", "reached"
STATES = (OK, NEAR_STATE, REACHED)


@dataclass(frozen=True, slots=True)
class Spend:
    """One budget window's spend in its current period, as the ledger counts it."""

    period: str
    currency: str
    spent: Decimal
    #: The amount the decision enforces: the cap when one is set, else the budget.
    amount: Decimal
    resets_at: datetime

    def remaining_of(self, amount: Decimal) -> Decimal:
        """What is left of ``amount`` (the window's, or the budget a cap lowers): never below zero."""
        return max(Decimal(0), amount - self.spent)

    def state_of(self, amount: Decimal) -> str:
        """``reached`` once the spend is at ``amount``, ``near`` from 80 % of it, else ``ok``."""
        if amount <= 0 or self.spent >= amount:
            return REACHED
        return NEAR_STATE if self.spent >= amount * Decimal(str(NEAR)) else OK

    @property
    def remaining(self) -> Decimal:
        return self.remaining_of(self.amount)

    @property
    def state(self) -> str:
        return self.state_of(self.amount)


def period_spend(subscription: Subscription) -> dict[str, Spend] | None:
    """The spend of each budget period of ``subscription`` (its budget in force, or its cap): period -> spend;
    None when the ledger cannot be read (Redis away)."""
    budgets = _peek(subscription, ())
    if budgets is None:
        return None
    return {b["period"]: _spend(b) for b in budgets}


def key_spend(subscription: Subscription, keys: list[APIKey]) -> dict[int, Spend] | None:
    """The spend of each of ``keys`` that has a cap of its own, against that cap: key id -> spend (a rolled
    key and its successor share their counters, so the same figures); None when the ledger cannot be read.
    One peek per capped key: a subscription has a handful of keys, and each cap is a window of its own."""
    found: dict[int, Spend] = {}
    base = None
    for key in keys:
        if not key.cap_period or key.cap_amount is None or key.revoked_at is not None:
            continue
        base = base or subscriber_of(subscription)
        caps = tuple(rule for rule in key_rules(key) if rule.algorithm == "budget")
        budgets = _peek(subscription, caps, base)
        if budgets is None:
            return None
        own = [b for b in budgets if b["name"] == f"key-{key.cap_period}-cap"]
        if own:
            found[key.pk] = _spend(own[0])
    return found


def _peek(subscription: Subscription, key_caps: tuple, base: Any = None) -> list[dict[str, Any]] | None:
    subscriber = base or subscriber_of(subscription)
    if key_caps:
        subscriber = dataclasses.replace(subscriber, key_limits=key_caps)
    try:
        return api.standing(api.Client.of_subscription(subscriber))["budgets"]
    except STORE_ERRORS:
        return None


def _spend(budget: dict[str, Any]) -> Spend:
    return Spend(
        period=budget["period"],
        currency=budget["currency"],
        spent=Decimal(budget["spent"]),
        amount=Decimal(budget["amount"]),
        resets_at=datetime.fromisoformat(budget["resets_at"]),
    )
