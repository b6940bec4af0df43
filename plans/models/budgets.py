"""Money budgets and period quotas."""

from __future__ import annotations

from collections.abc import Collection
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q, QuerySet

from quotas.formats.money import format_money, round_money

from .plans import Plan, Subscription

#: The currency of a budget that names none (and of a plan with no budget).
DEFAULT_CURRENCY = "USD"


class Period(models.TextChoices):
    DAY = "day", "Calendar day"
    WEEK = "week", "Calendar week (from Monday)"
    MONTH = "month", "Calendar month"
    BILLING_MONTH = "billing_month", "Billing month (from the subscription's start day)"


class CostBudget(models.Model):
    """How much a client may spend per day or month: a plan's default, or one subscription's own.

    A subscription's budget replaces its plan's budget of the same period.
    """

    class BudgetPeriod(models.TextChoices):
        DAY = "day", "Calendar day"
        MONTH = "month", "Calendar month"

    plan = models.ForeignKey(Plan, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets")
    subscription = models.ForeignKey(
        Subscription, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    period = models.CharField(max_length=16, choices=BudgetPeriod.choices)
    amount = models.DecimalField(max_digits=14, decimal_places=6, validators=[MinValueValidator(Decimal("0"))])
    currency = models.CharField(
        max_length=3, default=DEFAULT_CURRENCY, validators=[RegexValidator(r"^[A-Z]{3}$", "ISO 4217 code")]
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(plan__isnull=False, subscription__isnull=True)
                | Q(plan__isnull=True, subscription__isnull=False),
                name="budget_has_one_owner",
            ),
            models.UniqueConstraint(fields=["plan", "period"], name="one_plan_budget_per_period"),
            models.UniqueConstraint(fields=["subscription", "period"], name="one_subscription_budget_per_period"),
        ]

    def __str__(self) -> str:
        owner = self.plan or self.subscription
        return f"{owner}: {format_money(self.amount, self.currency)} per {self.period}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Rounded half up, as every amount is charged (to_micros): the database would round half-even.
        if self.amount is not None:
            self.amount = round_money(Decimal(self.amount))
        super().save(*args, **kwargs)

    @property
    def name(self) -> str:
        return f"{self.period}-budget"

    def currencies_beside(self) -> set[str]:
        """The currencies of the other budgets that must share this one's: every budget of its plan (or its
        subscription's plan), the plan's own and each of its subscriptions'. A plan has one currency (its prices
        are in it too, and one price is charged to every budget of a request)."""
        plan_id = self.plan_id if self.plan_id is not None else getattr(self.subscription, "plan_id", None)
        if plan_id is None:
            return set()
        return set(plan_budgets(plan_id).exclude(pk=self.pk).values_list("currency", flat=True))

    @staticmethod
    def move_refusal(plan: Plan, subscriptions: Collection[int]) -> str | None:
        """Why ``subscriptions`` (ids) cannot move to ``plan``: their own budgets would put a second currency on
        it (or, moved together, several); None when they can."""
        theirs = set(CostBudget.objects.filter(subscription_id__in=subscriptions).values_list("currency", flat=True))
        if not theirs:
            return None
        plans = set(plan_budgets(plan.pk).exclude(subscription_id__in=subscriptions).values_list("currency", flat=True))
        if len(theirs | plans) <= 1:
            return None
        if not plans:
            return (
                f"These subscriptions' own budgets are in {', '.join(sorted(theirs))}: on one plan they would be in "
                "several currencies, and a plan has one. Change their budgets to one currency first."
            )
        return (
            f"Plan {plan.slug}'s budgets are in {', '.join(sorted(plans))} and the subscription's own budgets in "
            f"{', '.join(sorted(theirs))}: a plan has one currency. Change the subscription's budgets first."
        )

    def clean(self) -> None:
        beside = self.currencies_beside()
        if beside and beside != {self.currency}:
            raise ValidationError(
                {
                    "currency": f"This plan's budgets (its own and its subscriptions') are in "
                    f"{', '.join(sorted(beside))}: a plan has one currency."
                }
            )
        # The owner, not only its id: on an admin add page the budget is validated with its plan or subscription
        # set but not saved yet (no id), and that is one owner all the same.
        if (self.plan_id is not None or self.plan is not None) == (
            self.subscription_id is not None or self.subscription is not None
        ):
            raise ValidationError("A budget belongs to a plan or to a subscription (exactly one).")


def plan_budgets(plan_id: int) -> QuerySet[CostBudget]:
    """The budgets that share plan ``plan_id``'s currency: the plan's and each of its subscriptions' own."""
    return CostBudget.objects.filter(Q(plan_id=plan_id) | Q(subscription__plan_id=plan_id))


class PeriodQuota(models.Model):
    """N requests (or N weight units) per calendar day, week, month or billing month."""

    class Unit(models.TextChoices):
        REQUESTS = "requests", "Requests"
        WEIGHT = "weight", "Weight units"

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="period_quotas")
    name = models.CharField(
        max_length=60, validators=[RegexValidator(r"^[A-Za-z0-9_.-]+$", "Use letters, digits, '.', '_' or '-'.")]
    )
    scope = models.CharField(max_length=100, blank=True, help_text="A view's quota_scope; empty for every request.")
    period = models.CharField(max_length=16, choices=Period.choices)
    units = models.PositiveBigIntegerField(validators=[MinValueValidator(1)])
    unit = models.CharField(max_length=8, choices=Unit.choices, default=Unit.REQUESTS)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["plan", "name"], name="unique_period_quota_name_per_plan")]

    def __str__(self) -> str:
        return f"{self.plan.slug}:{self.name} {self.units} {self.unit}/{self.period}" if self.plan_id else self.name
