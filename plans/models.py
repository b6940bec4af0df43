"""Plans, subscriptions, API keys and endpoint limits."""

from __future__ import annotations

import secrets
from collections.abc import Collection
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from quotas.acl import parse_network
from quotas.conf import ALGORITHMS, quota_settings
from quotas.exceptions import InvalidRate
from quotas.identity import hash_api_key
from quotas.rates import parse_rates

API_KEY_PREFIX = "qk_"
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def validate_rates(value: str) -> None:
    """Model validator for a rate string such as '10/s; 100/min'."""
    try:
        parse_rates(value)
    except InvalidRate as exc:
        raise ValidationError(str(exc), code="invalid_rate") from exc


def validate_methods(value: str) -> None:
    """Model validator for a comma-separated list of HTTP methods."""
    unknown = [m for m in _split_methods(value) if m not in HTTP_METHODS]
    if unknown:
        raise ValidationError(
            f"Unknown HTTP method(s): {', '.join(unknown)}. Use any of {', '.join(HTTP_METHODS)}.",
            code="invalid_method",
        )


def validate_durations(value: str) -> None:
    """Model validator for escalating ban durations such as '60,600,3600'."""
    parts = [p.strip() for p in value.split(",")]
    if not parts or not all(p.isdigit() and 0 < int(p) <= 30 * 86400 for p in parts):
        raise ValidationError(
            "Give ban lengths in seconds separated by commas, each from 1 to 2592000 (30 days), e.g. 60,600,3600.",
            code="invalid_durations",
        )


def parse_durations(value: str) -> tuple[int, ...]:
    return tuple(int(p) for p in value.split(",") if p.strip().isdigit())


def _split_methods(value: str) -> list[str]:
    return [m.strip().upper() for m in value.replace(";", ",").split(",") if m.strip()]


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
        default=False, help_text="The plan of anonymous clients and of users without a subscription."
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


class Subscription(models.Model):
    """A client bound to one plan: a Django user, or the holder of API keys.

    A plan change takes effect on the client's next request.
    """

    name = models.CharField(max_length=200, help_text="Who this is, e.g. the customer's name.")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="subscriptions")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="quota_subscription"
    )
    started_on = models.DateField(default=timezone.localdate, help_text="Anchors billing periods.")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.plan.slug})" if self.plan_id else self.name


class APIKeyQuerySet(models.QuerySet):
    def usable(self) -> APIKeyQuerySet:
        """Keys a request may use now: not revoked, not expired, of an active subscription."""
        return self.filter(revoked_at__isnull=True, subscription__is_active=True).exclude(
            expires_at__lte=timezone.now()
        )


class APIKey(models.Model):
    """An API key, stored as a SHA-256 hash; the raw key is shown once at issue."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, editable=False, help_text="The first characters, to recognise a key.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="After this moment the key gets 401 (reason: expired). Empty: never."
    )
    last_used_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Last request with this key (copied by the usage flush)."
    )

    objects = APIKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or self.subscription.name})"

    @classmethod
    def issue(
        cls, subscription: Subscription, name: str = "", raw: str | None = None, expires_at: datetime | None = None
    ) -> tuple[APIKey, str]:
        """Create a key for ``subscription`` (valid until ``expires_at``, if given); returns it and the raw key."""
        raw = raw or API_KEY_PREFIX + secrets.token_urlsafe(32)
        key = cls.objects.create(
            subscription=subscription, name=name, prefix=raw[:10], key_hash=hash_api_key(raw), expires_at=expires_at
        )
        return key, raw

    def clean(self) -> None:
        # Only a change can be checked against the clock: an expiry already past when it is set is a typo.
        if self.expires_at is not None and self.expires_at <= timezone.now() and self._expiry_changed():
            raise ValidationError({"expires_at": "This moment is in the past: the key would never work."})

    def _expiry_changed(self) -> bool:
        if self.pk is None:
            return True
        return type(self).objects.filter(pk=self.pk).values_list("expires_at", flat=True).first() != self.expires_at

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def revoke(self) -> None:
        """Revoke the key; requests with it get 401 from the next rules refresh on."""
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])


class EndpointLimit(models.Model):
    """One limit of a plan: what it matches, how it counts, and its rates.

    It matches a DRF view's ``quota_scope`` if ``scope`` is set, else requests
    whose path starts with ``path_prefix``, else every request (a plan-wide
    limit), optionally only for some HTTP methods.
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

    def clean(self) -> None:
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
        if self.algorithm == self.Algorithm.CONCURRENCY:
            if self.burst is not None:
                errors["burst"] = "A concurrency limit has no burst: its count is the requests in flight."
            if self.rates and ";" in self.rates:
                errors["rates"] = "A concurrency limit takes one rate: <requests in flight>/<lease>, e.g. 5/30s."
        if self.burst is not None and self.burst < 1:
            errors["burst"] = "Burst must be at least 1."
        if self.scope and self.path_prefix:
            errors["path_prefix"] = "Set a scope or a path prefix, not both."
        if self.path_prefix and not self.path_prefix.startswith("/"):
            errors["path_prefix"] = "A path prefix starts with '/'."
        try:
            rates = parse_rates(self.rates)
        except InvalidRate:
            rates = ()  # reported by the field validator
        if rates and self.weight > max(max(r.limit, self.burst or 0) for r in rates):
            errors["weight"] = "The weight is larger than every rate's count: no request could ever pass."
        self.methods = ", ".join(_split_methods(self.methods))
        if errors:
            raise ValidationError(errors)

    @property
    def method_set(self) -> frozenset[str]:
        return frozenset(_split_methods(self.methods))


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
        max_length=3, default="USD", validators=[RegexValidator(r"^[A-Z]{3}$", "ISO 4217 code")]
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
        return f"{owner}: {self.amount} {self.currency} per {self.period}"

    @property
    def name(self) -> str:
        return f"{self.period}-budget"

    def clean(self) -> None:
        if bool(self.plan_id) == bool(self.subscription_id):
            raise ValidationError("A budget belongs to a plan or to a subscription (exactly one).")


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


def validate_cidr(value: str) -> None:
    """Model validator for an IPv4 or IPv6 address or network."""
    try:
        parse_network(value)
    except ValueError as exc:
        raise ValidationError(
            f"'{value}' is not an IPv4 or IPv6 address or network; write e.g. 203.0.113.7, 203.0.113.0/24 "
            "or 2001:db8::/32.",
            code="invalid_cidr",
        ) from exc


class ACLEntry(models.Model):
    """Allow or deny one API key, user, subscription or IP network outright.

    A deny refuses the client's requests (403) before any limit is counted; an
    allow lets them through without counting. A deny beats an allow. A
    ``scope`` restricts the entry to one view's ``quota_scope``; an entry stops
    applying at ``expires_at`` by itself.
    """

    class Action(models.TextChoices):
        ALLOW = "allow", "Allow (skip every limit)"
        DENY = "deny", "Deny (refuse with 403)"

    class Kind(models.TextChoices):
        KEY = "key", "API key"
        USER = "user", "User"
        SUBSCRIPTION = "subscription", "Subscription"
        IP = "ip", "IP address or network"

    action = models.CharField(max_length=8, choices=Action.choices)
    api_key = models.ForeignKey(
        APIKey,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="acl_entries",
        help_text="Matches this key only.",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="acl_entries",
        help_text="Matches requests authenticated as this user.",
    )
    subscription = models.ForeignKey(
        Subscription,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="acl_entries",
        help_text="Matches every key of this subscription and its user.",
    )
    cidr = models.CharField(
        "IP or CIDR",
        max_length=64,
        blank=True,
        validators=[validate_cidr],
        help_text="An address or network, IPv4 or IPv6, e.g. 203.0.113.0/24 or 2001:db8::/32.",
    )
    scope = models.CharField(max_length=100, blank=True, help_text="A view's quota_scope; empty for every request.")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: until removed.")
    reason = models.TextField(help_text="Why: shown to operators, and in the refusal for a deny.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, editable=False, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "access list entry"
        verbose_name_plural = "access list entries"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(api_key__isnull=False, user__isnull=True, subscription__isnull=True, cidr="")
                    | Q(api_key__isnull=True, user__isnull=False, subscription__isnull=True, cidr="")
                    | Q(api_key__isnull=True, user__isnull=True, subscription__isnull=False, cidr="")
                    | (Q(api_key__isnull=True, user__isnull=True, subscription__isnull=True) & ~Q(cidr=""))
                ),
                name="acl_entry_matches_one_target",
            ),
        ]

    def __str__(self) -> str:
        scope = f" on {self.scope}" if self.scope else ""
        return f"{self.action} {self.get_kind_display().lower()} {self.target}{scope}"

    def _targets(self) -> list[str]:
        """The kinds whose target is set (exactly one in a valid entry)."""
        values = {
            self.Kind.KEY: self.api_key_id,
            self.Kind.USER: self.user_id,
            self.Kind.SUBSCRIPTION: self.subscription_id,
            self.Kind.IP: self.cidr,
        }
        return [kind for kind, value in values.items() if value]

    @property
    def kind(self) -> str:
        """What the entry matches: ``key``, ``user``, ``subscription`` or ``ip`` (empty unless exactly one)."""
        targets = self._targets()
        return str(targets[0]) if len(targets) == 1 else ""

    def get_kind_display(self) -> str:
        return self.Kind(self.kind).label if self.kind else "nothing"

    @property
    def target(self) -> str:
        """The matched key, user, subscription or network, as text."""
        kind = self.kind
        if kind == self.Kind.KEY:
            return str(self.api_key)
        if kind == self.Kind.USER:
            return str(self.user)
        if kind == self.Kind.SUBSCRIPTION:
            return str(self.subscription)
        return self.cidr or "?"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        # clean() explains a missing or doubled target better than the constraint's generic message.
        if len(self._targets()) == 1:
            super().validate_constraints(exclude=exclude)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        self.cidr = self.cidr.strip()
        self.scope = self.scope.strip()
        targets = self._targets()
        if not targets:
            raise ValidationError(
                "Choose what this entry matches: an API key, a user, a subscription or an IP/CIDR.",
                code="no_target",
            )
        if len(targets) > 1:
            raise ValidationError(
                "An entry matches exactly one of API key, user, subscription or IP/CIDR; "
                f"this one sets {' and '.join(self.Kind(t).label for t in targets)}. Clear all but one.",
                code="several_targets",
            )
        if self.cidr:
            try:
                network = parse_network(self.cidr)
            except ValueError:
                pass  # reported by the field validator
            else:
                self.cidr = str(network)
                if network.prefixlen == 0 and self.action == self.Action.ALLOW:
                    errors["cidr"] = (
                        f"Allowing {network} would lift every limit for every client; allow narrower networks."
                    )
        if self._state.adding and self.expires_at is not None and self.expires_at <= timezone.now():
            errors["expires_at"] = "The expiry must be in the future (leave it empty for no expiry)."
        if not self.reason.strip():
            errors["reason"] = "Say why this client is allowed or denied."
        if errors:
            raise ValidationError(errors)


class ClientBan(models.Model):
    """A ban escalation imposed on a client (the ban itself lives in Redis and expires there).

    Recorded from the ``quotas.signals.client_banned`` signal; lifting it in
    the admin deletes the ban from Redis at once.
    """

    client = models.CharField(max_length=200, help_text="The client's tag, e.g. s.12 or ip.203.0.113.7.")
    subscription = models.ForeignKey(Subscription, null=True, blank=True, on_delete=models.SET_NULL)
    plan = models.ForeignKey(Plan, null=True, blank=True, on_delete=models.SET_NULL)
    until = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["client", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.client} until {self.until:%Y-%m-%d %H:%M:%S}"

    @property
    def is_active(self) -> bool:
        return self.lifted_at is None and self.until > timezone.now()
