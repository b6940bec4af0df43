"""Plans and the subscriptions on them."""

from __future__ import annotations

from collections.abc import Collection
from datetime import date
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from quotas.settings import quota_settings

from .validators import validate_durations


class Plan(models.Model):
    """A commercial plan (free, pro, enterprise) that groups endpoint limits."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=100)
    monthly_price = models.DecimalField(
        max_digits=10, decimal_places=2, default=Decimal("0"), validators=[MinValueValidator(Decimal("0"))]
    )
    description = models.TextField(blank=True)
    priority = models.PositiveSmallIntegerField(
        default=0, help_text="Higher is protected longer under load: the lowest priority is shed first."
    )
    is_default = models.BooleanField(
        default=False,
        help_text="The plan of anonymous clients and of users with neither a subscription nor a group plan. They "
        "then get this plan's limits instead of DRF's anon and user rates: give it a limit for every request (no "
        "scope, path or methods), or every view its limits do not name is unlimited for them.",
    )
    ban_threshold = models.PositiveIntegerField(
        default=0, help_text="Ban a client refused more than this many times within the ban window (0: never)."
    )
    ban_window = models.PositiveIntegerField(default=60, validators=[MinValueValidator(1)], help_text="Seconds.")
    ban_durations = models.CharField(
        max_length=100,
        default="60,600,3600",
        validators=[validate_durations],
        help_text="Seconds of the 1st, 2nd, ... ban (the last repeats), e.g. 60,600,3600.",
    )
    local_allowances = models.BooleanField(
        "Local allowances",
        default=True,
        help_text="A client sending one server process many requests a second takes a few requests' units at once "
        "and is admitted from them without asking Redis each time (QUOTAS['ALLOWANCES']). Limits stay exact; "
        "a client may be held a little under its limit while units sit unused in another process. "
        "Off: every request asks Redis.",
    )

    class Meta:
        ordering = ["monthly_price", "priority", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["is_default"], condition=Q(is_default=True), name="one_default_plan"),
        ]

    def __str__(self) -> str:
        return self.name

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        # A clearer message than the generic constraint violation.
        if self.is_default and Plan.objects.filter(is_default=True).exclude(pk=self.pk).exists():
            raise ValidationError({"is_default": "Another plan is already the default; untick it there first."})
        super().validate_constraints(exclude=exclude)


def budget_today() -> date:
    """Today where budget and billing periods begin (``QUOTAS['BUDGET_TIME_ZONE']``), not in ``TIME_ZONE``:
    a sign-up late on Jan 30 in Los Angeles is Jan 31 in UTC, and its billing month starts with the periods."""
    return timezone.localdate(timezone=ZoneInfo(str(quota_settings.BUDGET_TIME_ZONE)))


class Subscription(models.Model):
    """A client bound to one plan: a Django user, or the holder of API keys.

    A plan change takes effect on the client's next request.
    """

    name = models.CharField(max_length=200, help_text="Who this is, e.g. the customer's name.")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="subscriptions")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="quota_subscription"
    )
    started_on = models.DateField(
        default=budget_today,
        help_text="Anchors billing periods (its day of the month, in QUOTAS['BUDGET_TIME_ZONE']).",
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.plan.slug})" if self.plan_id else self.name

    def clean(self) -> None:
        # A plan has one currency: its own budgets may not put a second one on the plan it moves to. (The
        # budget model through the reverse relation: plans.models.budgets imports this module.)
        if self.pk is not None and self.plan_id is not None:
            refusal = self.budgets.model.move_refusal(self.plan, [self.pk])
            if refusal:
                raise ValidationError({"plan": refusal})
