"""Usage records (daily totals per client, plan and scope) and budget alerts."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from plans.models import Plan, Subscription
from quotas.formats.money import from_micros

#: The counters of a usage row (see usage.store.COUNTER_FIELDS for their Redis names).
COUNTERS = (
    "allowed", "denied_rate", "denied_budget", "denied_acl", "denied_capacity", "denied_banned",
    "shadow_would_deny", "weight", "cost_micros",
)  # fmt: skip
#: The counters of refused requests.
DENIALS = ("denied_rate", "denied_budget", "denied_acl", "denied_capacity", "denied_banned")


class UsageRecord(models.Model):
    """One client's usage of one day under one plan and scope: cumulative totals.

    Rows are written only by :func:`usage.flush.flush_usage`, which copies the
    decision script's Redis counters as absolute values (never adds), so a row
    can be rewritten any number of times without double counting.
    """

    client = models.CharField(max_length=100, help_text="The client tag, e.g. s.12 (subscription 12), u.5, ip.….")
    subscription = models.ForeignKey(
        Subscription, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records"
    )
    plan = models.ForeignKey(Plan, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records")
    plan_key = models.PositiveBigIntegerField(
        default=0, help_text="The plan id the usage was counted under (0: none); kept if the plan is deleted."
    )
    scope = models.CharField(max_length=100, blank=True, help_text="The view's quota_scope; empty for none.")
    day = models.DateField(help_text="The usage day: a day where budget days begin (QUOTAS['BUDGET_TIME_ZONE']).")
    allowed = models.PositiveBigIntegerField(default=0)
    denied_rate = models.PositiveBigIntegerField(default=0, help_text="Refused by a rate limit.")
    denied_budget = models.PositiveBigIntegerField(default=0, help_text="Refused by a money budget.")
    denied_acl = models.PositiveBigIntegerField(default=0, help_text="Refused by an access rule.")
    denied_capacity = models.PositiveBigIntegerField(default=0, help_text="Refused while capacity was reduced.")
    denied_banned = models.PositiveBigIntegerField(default=0, help_text="Refused while the client was banned.")
    shadow_would_deny = models.PositiveBigIntegerField(default=0, help_text="A shadow limit would have refused.")
    weight = models.PositiveBigIntegerField(default=0, help_text="Units spent by admitted requests.")
    cost_micros = models.BigIntegerField(default=0, help_text="Cost of admitted requests in millionths of a unit.")
    generation = models.CharField(
        max_length=40,
        blank=True,
        default="",
        help_text="Which life of the Redis usage hash these totals came from: Redis losing its data starts a new one, "
        "whose counts are added to the earlier rows, never compared with them.",
    )
    observed_at = models.DateTimeField(help_text="Redis server time of the snapshot these totals were copied from.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day", "client", "plan_key", "scope"]
        constraints = [
            models.UniqueConstraint(
                fields=["client", "plan_key", "scope", "day", "generation"], name="unique_usage_row_generation"
            ),
        ]
        indexes = [models.Index(fields=["day"], name="usage_day_idx")]
        permissions = [("view_all_usage", "Can view every client's usage (dashboard, usage API)")]

    def __str__(self) -> str:
        return f"{self.client} {self.day} {self.scope or '-'}: {self.allowed} allowed"

    @property
    def denied(self) -> int:
        """Requests refused for any reason (shadow limits never refuse)."""
        return sum(getattr(self, name) for name in DENIALS)

    @property
    def cost(self) -> Decimal:
        return from_micros(self.cost_micros)


class BudgetAlert(models.Model):
    """A client's spending reached 80 % or 100 % of a budget in one period (recorded once)."""

    class Threshold(models.IntegerChoices):
        WARNING = 80, "80 %"
        EXHAUSTED = 100, "100 %"

    client = models.CharField(max_length=100, help_text="The client tag, e.g. s.12.")
    subscription = models.ForeignKey(
        Subscription, null=True, blank=True, on_delete=models.SET_NULL, related_name="budget_alerts"
    )
    budget = models.CharField(max_length=100, help_text="The budget's name.")
    limit = models.CharField(
        max_length=100, blank=True, help_text="The limit's id (b<budget>, c-<period> a cap alone, kc<key> a key's cap)."
    )
    period_start = models.DateTimeField()
    threshold = models.PositiveSmallIntegerField(choices=Threshold.choices)
    spent_micros = models.BigIntegerField(help_text="Spent in the period when the threshold was reached.")
    amount_micros = models.BigIntegerField(help_text="The budget's amount for the period.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["client", "limit", "budget", "period_start", "threshold"], name="one_alert_per_threshold"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.client}: {self.budget} at {self.threshold} %"

    @property
    def spent(self) -> Decimal:
        return from_micros(self.spent_micros)

    @property
    def amount(self) -> Decimal:
        return from_micros(self.amount_micros)
