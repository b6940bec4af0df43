"""Allow and deny lists."""

from __future__ import annotations

from collections.abc import Collection

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from quotas.formats.acl import covers_everyone, parse_network

from .keys import APIKey
from .plans import Subscription
from .validators import validate_cidr


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
                if self.action == self.Action.ALLOW and covers_everyone([network]):
                    errors["cidr"] = (
                        f"Allowing {network} would lift every limit for every client; allow narrower networks."
                    )
        if self._state.adding and self.expires_at is not None and self.expires_at <= timezone.now():
            errors["expires_at"] = "The expiry must be in the future (leave it empty for no expiry)."
        if not self.reason.strip():
            errors["reason"] = "Say why this client is allowed or denied."
        if errors:
            raise ValidationError(errors)
