"""What a customer sets for itself: a spending cap below its plan's budget, and alert thresholds of its own.

Both are set by the subscription's owners (the ``console`` app's API and page), not by staff: staff set plans
and budgets in the admin, and a customer may only ever ask for less than those. A cap lowers the budget of its
period for that subscription and shares its counter, so a cap set in the middle of a day already counts what
the day has spent (:func:`plans.rules.subscriber_of`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from quotas.formats.money import format_money, round_money

from .budgets import DEFAULT_CURRENCY, CostBudget, plan_budgets
from .plans import Subscription

#: The most thresholds a subscription may set (each is one event per budget and period at most).
MAX_THRESHOLDS = 10
#: A threshold at the whole budget.
FULL = 100


class SpendCap(models.Model):
    """A subscription's own spending limit for a day or a month, at most its budget of that period."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="spend_caps")
    period = models.CharField(max_length=16, choices=CostBudget.BudgetPeriod.choices)
    amount = models.DecimalField(
        max_digits=14, decimal_places=6, validators=[MinValueValidator(Decimal("0"))],
        help_text="In the plan's currency; at most the budget of the same period.",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["subscription", "period"], name="one_cap_per_period")]
        ordering = ["subscription", "period"]

    def __str__(self) -> str:
        return f"{self.subscription}: at most {format_money(self.amount)} per {self.period}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.amount is not None:
            self.amount = round_money(Decimal(self.amount))  # as budgets are: half up, as every amount is charged
        super().save(*args, **kwargs)

    def budget(self) -> CostBudget | None:
        """The budget this cap lowers: the subscription's own of the period, else its plan's."""
        return budget_of(self.subscription, self.period)

    def clean(self) -> None:
        check_below_budget(
            self.subscription if self.subscription_id is not None else None, self.period, self.amount,
            fields=("period", "amount"), none="a cap to lower: ask for one, or cap another period",
            lowers="a cap may only lower what the plan allows",
        )  # fmt: skip


class AlertThresholds(models.Model):
    """The percentages of each budget and cap at which a subscription hears of its spending (once each per
    budget and period), besides the platform's own alerts at 80 % and 100 %."""

    subscription = models.OneToOneField(Subscription, on_delete=models.CASCADE, related_name="alert_thresholds")
    percents = models.JSONField(default=list, help_text="Whole percentages from 1 to 100, e.g. [50, 75, 90].")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "alert thresholds"

    def __str__(self) -> str:
        return f"{self.subscription}: {', '.join(f'{p} %' for p in self.percents)}"

    def clean(self) -> None:
        self.percents = validate_percents(self.percents)


def validate_percents(value: Any) -> list[int]:
    """``value`` as a sorted list of distinct whole percentages (1 to 100); raises ValidationError naming why not."""
    if not isinstance(value, list | tuple):
        raise ValidationError({"percents": "A list of whole percentages, e.g. [50, 75, 90]."})
    if len(value) > MAX_THRESHOLDS:
        raise ValidationError({"percents": f"At most {MAX_THRESHOLDS} thresholds."})
    if any(isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= FULL for p in value):
        raise ValidationError({"percents": "Each threshold is a whole percentage from 1 to 100."})
    return sorted(set(value))


def check_below_budget(
    subscription: Subscription | None,
    period: str,
    amount: Decimal | None,
    *,
    fields: tuple[str, str],
    none: str,
    lowers: str,
) -> None:
    """Raise ValidationError unless ``amount`` is at most ``subscription``'s budget of ``period`` (a customer's cap,
    on the subscription or on one key, only ever lowers it). ``fields`` name the period's and the amount's field
    in the message; ``none`` ends the message for a period without a budget, ``lowers`` the one for too much."""
    period_field, amount_field = fields
    budget = budget_of(subscription, period) if subscription is not None else None
    if budget is None:
        raise ValidationError({period_field: f"This subscription has no {period} budget for {none}."})
    if amount is not None and round_money(Decimal(amount)) > budget.amount:
        raise ValidationError(
            {amount_field: f"At most the {period} budget, {format_money(budget.amount, budget.currency)}: {lowers}."}
        )


def cap_name(period: str) -> str:
    """The name of a capped period's window, as its RateLimit policy and refusals show it (``day-cap``)."""
    return f"{period}-cap"


def plan_currency(plan_id: int) -> str:
    """The currency of plan ``plan_id``'s money (a plan has one: its budgets', and its subscriptions' own); the
    budgets' default for a plan with none."""
    found = plan_budgets(plan_id).values_list("currency", flat=True).first()
    return found or DEFAULT_CURRENCY


def budget_of(subscription: Subscription, period: str) -> CostBudget | None:
    """The budget of ``period`` that applies to ``subscription``: its own, else its plan's (None: neither)."""
    own = CostBudget.objects.filter(subscription=subscription, period=period).first()
    return own or CostBudget.objects.filter(plan_id=subscription.plan_id, period=period).first()
