"""The admin's switch and pins, and the controller's history."""

from __future__ import annotations

import math
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from plans.models import Plan


def validate_multiplier(value: float) -> None:
    """A multiplier scales limits down: ``0 < value <= 1``."""
    if value is None or not math.isfinite(value) or not 0 < value <= 1:
        raise ValidationError(
            "A multiplier is greater than 0 and at most 1 (1 leaves the limits as they are).", code="invalid_multiplier"
        )


class AdaptiveConfig(models.Model):
    """The single row switching adaptation on or off from the admin.

    ``QUOTAS['ADAPTIVE']['ENABLED']`` must be on too.
    """

    enabled = models.BooleanField(
        default=True, help_text="Off: the controller publishes the pinned multipliers, and 1.0 for every other plan."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "adaptive limits switch"
        verbose_name_plural = "adaptive limits switch"
        constraints = [models.CheckConstraint(condition=Q(pk=1), name="adaptive_config_singleton")]

    def __str__(self) -> str:
        return f"Adaptive limits {'on' if self.enabled else 'off'}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = 1
        super().save(*args, **kwargs)

    @classmethod
    def is_enabled(cls) -> bool:
        """Whether the admin lets the controller adapt (True while the row does not exist)."""
        return cls.objects.filter(pk=1).values_list("enabled", flat=True).first() is not False


class MultiplierOverrideQuerySet(models.QuerySet):
    def active(self, now: object = None) -> MultiplierOverrideQuerySet:
        """Pins that have not expired at ``now``."""
        now = now or timezone.now()
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


class MultiplierOverride(models.Model):
    """A multiplier pinned by hand for one plan, until it expires (the latest active pin wins)."""

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="multiplier_overrides")
    multiplier = models.FloatField(validators=[validate_multiplier], help_text="0 < m <= 1, e.g. 0.5 halves the rates.")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: until deleted.")
    reason = models.CharField(max_length=200, help_text="Why, for whoever looks next (shown in the snapshots).")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MultiplierOverrideQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(multiplier__gt=0) & Q(multiplier__lte=1), name="adaptive_override_multiplier_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.plan.slug} x{self.multiplier}" if self.plan_id else f"x{self.multiplier}"

    @property
    def is_active(self) -> bool:
        return self.expires_at is None or self.expires_at > timezone.now()


class AdaptiveSnapshot(models.Model):
    """One change of the published multipliers: the signals, the result and why (kept RETENTION_DAYS)."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    level = models.FloatField(help_text="The capacity level, 1 = no reduction.")
    signals = models.JSONField(default=dict)
    multipliers = models.JSONField(default=dict, help_text="Plan id to multiplier, as published.")
    reason = models.TextField()

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = "created_at"

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.reason[:60]}"
