"""Endpoint limits of a plan, and a subscription's own rates for them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from quotas.exceptions import InvalidRate
from quotas.formats.money import round_money
from quotas.formats.rates import parse_rates
from quotas.settings import ALGORITHMS, quota_settings

from ..countries import split_countries, validate_countries
from .plans import Plan, Subscription
from .validators import _split_methods, validate_methods, validate_rates


class EndpointLimit(models.Model):
    """One limit of a plan: what it matches, how it counts, and its rates.

    It matches a DRF view's ``quota_scope`` if ``scope`` is set, else requests
    whose path starts with ``path_prefix``, else every request (a plan-wide
    limit), optionally only for some HTTP methods, and optionally only for
    requests from some ``countries`` (the client address's country in
    ``QUOTAS['GEOIP_COUNTRY_DB']``; see Concepts, Per-country limits).
    """

    class Algorithm(models.TextChoices):
        FIXED_WINDOW = "fixed_window", "Fixed window"
        SLIDING_WINDOW_LOG = "sliding_window_log", "Sliding window log (exact)"
        SLIDING_WINDOW_COUNTER = "sliding_window_counter", "Sliding window counter (approximate)"
        TOKEN_BUCKET = "token_bucket", "Token bucket"
        LEAKY_BUCKET = "leaky_bucket", "Leaky bucket"
        CONCURRENCY = "concurrency", "Concurrency (requests in flight; the period is the lease)"

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="limits")
    name = models.CharField(
        max_length=60,
        validators=[RegexValidator(r"^[A-Za-z0-9_.-]+$", "Use letters, digits, '.', '_' or '-'.")],
        help_text="Shown to clients as the policy name in RateLimit headers.",
    )
    scope = models.CharField(max_length=100, blank=True, help_text="A view's quota_scope; empty to match by path.")
    path_prefix = models.CharField(max_length=200, blank=True, help_text="Used when scope is empty, e.g. /api/.")
    methods = models.CharField(
        max_length=100, blank=True, validators=[validate_methods], help_text="Comma-separated; empty for all."
    )
    # Room for every code (250 x "XX, "): a limit may name most of the world.
    countries = models.CharField(
        max_length=1000,
        blank=True,
        validators=[validate_countries],
        help_text="Only for requests from these countries (ISO 3166-1 alpha-2 codes, e.g. CN, RU; needs "
        "QUOTAS['GEOIP_COUNTRY_DB']); empty for requests from anywhere.",
    )
    algorithm = models.CharField(max_length=32, choices=Algorithm.choices, default=Algorithm.TOKEN_BUCKET)
    rates = models.CharField(max_length=200, validators=[validate_rates], help_text="e.g. 10/s; 100/min; 5000/day")
    burst = models.PositiveIntegerField(
        null=True, blank=True, help_text="Bucket capacity for the bucket algorithms; default: each rate's count."
    )
    weight = models.PositiveIntegerField(default=1, help_text="Units a request spends unless its view says otherwise.")
    max_delay = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0)],
        help_text="Leaky bucket only: seconds a request may be held to smooth bursts (0 refuses instead).",
    )
    shadow = models.BooleanField(default=False, help_text="Evaluate and record, never block.")
    refund_on_error = models.BooleanField(default=False, help_text="Give the units back when the view fails (5xx).")
    price = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
        help_text="What a matching request costs, charged to the client's budgets (a view may estimate instead).",
    )

    class Meta:
        ordering = ["plan", "name"]
        constraints = [models.UniqueConstraint(fields=["plan", "name"], name="unique_limit_name_per_plan")]

    def __str__(self) -> str:
        return f"{self.plan.slug}:{self.name} {self.rates}" if self.plan_id else self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Rounded half up, as a view's estimate is charged (to_micros): the database would round half-even.
        if self.price is not None:
            self.price = round_money(Decimal(self.price))
        super().save(*args, **kwargs)

    def clean(self) -> None:
        errors = {**self._algorithm_errors(), **self._count_errors(), **self._match_errors(), **self._weight_errors()}
        self.methods = ", ".join(_split_methods(self.methods))
        self.countries = ", ".join(split_countries(self.countries))  # stored as it is shown: "CN, RU"
        if errors:
            raise ValidationError(errors)

    def _algorithm_errors(self) -> dict[str, str]:
        """What is wrong with the algorithm and the delay it may hold requests for, by field."""
        errors = {}
        if self.algorithm not in ALGORITHMS:
            errors["algorithm"] = f"Choose one of: {', '.join(ALGORITHMS)}."
        if self.max_delay and self.algorithm != self.Algorithm.LEAKY_BUCKET:
            errors["max_delay"] = "Only a leaky bucket can delay requests; set 0 or choose leaky_bucket."
        elif self.max_delay > quota_settings.MAX_DELAY_CAP:
            errors["max_delay"] = (
                f"At most {quota_settings.MAX_DELAY_CAP} seconds (QUOTAS['MAX_DELAY_CAP']): "
                "a held request occupies a worker."
            )
        return errors

    def _count_errors(self) -> dict[str, str]:
        """What is wrong with the burst, and with the rates of a concurrency limit, by field."""
        errors = {}
        if self.algorithm == self.Algorithm.CONCURRENCY:
            if self.burst is not None:
                errors["burst"] = "A concurrency limit has no burst: its count is the requests in flight."
            if self.rates and ";" in self.rates:
                errors["rates"] = "A concurrency limit takes one rate: <requests in flight>/<lease>, e.g. 5/30s."
        if self.burst is not None and self.burst < 1:
            errors["burst"] = "Burst must be at least 1."
        return errors

    def _match_errors(self) -> dict[str, str]:
        """What is wrong with what the limit matches (a scope, or a path prefix), by field."""
        errors = {}
        if self.scope and self.path_prefix:
            errors["path_prefix"] = "Set a scope or a path prefix, not both."
        if self.path_prefix and not self.path_prefix.startswith("/"):
            errors["path_prefix"] = "A path prefix starts with '/'."
        return errors

    def _weight_errors(self) -> dict[str, str]:
        """A weight no request could pass with, by field (a malformed rate is the field validator's)."""
        try:
            rates = parse_rates(self.rates)
        except InvalidRate:
            return {}
        if rates and self.weight > max(max(r.limit, self.burst or 0) for r in rates):
            return {"weight": "The weight is larger than every rate's count: no request could ever pass."}
        return {}

    @property
    def method_set(self) -> frozenset[str]:
        return frozenset(_split_methods(self.methods))

    @property
    def country_set(self) -> frozenset[str]:
        """The countries the limit is kept to (upper-cased codes); empty for requests from anywhere."""
        return frozenset(split_countries(self.countries))


class LimitOverride(models.Model):
    """A subscription's own rates for one of its plan's limits, or no limit at all."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="overrides")
    limit = models.ForeignKey(EndpointLimit, on_delete=models.CASCADE, related_name="overrides")
    rates = models.CharField(max_length=200, blank=True, validators=[validate_rates])
    unlimited = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["subscription", "limit"], name="one_override_per_limit")]

    def __str__(self) -> str:
        return f"{self.subscription.name}: {self.limit.name} -> {'unlimited' if self.unlimited else self.rates}"

    def clean(self) -> None:
        if self.unlimited == bool(self.rates):
            raise ValidationError("Either give rates or tick unlimited (exactly one).")
        if self.limit_id and self.subscription_id and self.limit.plan_id != self.subscription.plan_id:
            raise ValidationError({"limit": "That limit belongs to another plan than this subscription's."})
