"""API keys: issued to a subscription, stored as a hash, revocable, expiring, and rolled (replaced by a new key,
the old one working beside it for an overlap)."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from quotas.internal_api import hash_api_key

from .caps import check_below_budget
from .plans import Subscription
from .validators import validate_rates

API_KEY_PREFIX = "qk_"


class KeyState(models.TextChoices):
    """Where a key stands now (:attr:`APIKey.state`)."""

    ACTIVE = "active", "Active"
    ROLLED = "rolled", "Rolled (replaced; works until its overlap ends)"
    EXPIRED = "expired", "Expired"
    REVOKED = "revoked", "Revoked"


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
    last_used_from = models.GenericIPAddressField(
        null=True, blank=True, editable=False, help_text="The client address of that request (as limits see it)."
    )
    own_rates = models.CharField(
        max_length=200, blank=True, validators=[validate_rates],
        help_text="This key's own rates, e.g. 10/s; 1000/day, counted on every request it makes besides its plan's "
        "limits (both apply, so never above them). Empty: the plan's alone.",
    )  # fmt: skip
    cap_period = models.CharField(
        max_length=8, blank=True, choices=[("day", "Calendar day"), ("month", "Calendar month")],
        help_text="The period of this key's own spending cap (empty: none).",
    )  # fmt: skip
    cap_amount = models.DecimalField(
        max_digits=14, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(Decimal("0"))],
        help_text="This key's own spending cap per period, at most its subscription's budget of that period.",
    )  # fmt: skip
    rolled_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="rolled_from", editable=False,
        help_text="The key that replaced this one when it was rolled.",
    )  # fmt: skip
    counters_of = models.PositiveBigIntegerField(
        null=True, blank=True, editable=False,
        help_text="The key whose own counters (rate, cap) this one spends: the first key of its rolls. Empty: "
        "its own.",
    )  # fmt: skip

    objects = APIKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or self.subscription.name})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The admin and forms call clean(); code that saves directly must not move a key either.
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "subscription" in update_fields:
            self._refuse_a_move(self._stored_state())
        super().save(*args, **kwargs)

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
        stored = self._stored_state()
        self._refuse_a_move(stored)
        # Only a change can be checked against the clock: an expiry already past when it is set is a typo.
        if self.expires_at is not None and self.expires_at <= timezone.now() and self._expiry_changed(stored):
            raise ValidationError({"expires_at": "This moment is in the past: the key would never work."})
        # Expiry, once reached, is final like revocation: bringing a key back is issuing one (the permission
        # quota_plans.add_apikey), not editing one, and every copy of the old key would come back with it.
        if stored is not None and self._expiry_changed(stored) and _has_passed(stored["expires_at"]):
            raise ValidationError({"expires_at": "An expired key stays expired: issue a new key instead."})
        # Revocation is final: bringing a key back would bring back every sign-in and copy of it that revoking
        # ended. Whoever should use the API again gets a new key.
        if self.revoked_at is None and stored is not None and stored["revoked_at"] is not None:
            raise ValidationError({"revoked_at": "A revoked key stays revoked: issue a new key instead."})

    def _refuse_a_move(self, stored: dict[str, Any] | None) -> None:
        # A key authenticates as its subscription: moving it would hand whoever holds it another customer's
        # usage and budget. Whoever needs access to another subscription gets a key issued for it.
        if stored is not None and stored["subscription_id"] != self.subscription_id:
            raise ValidationError({"subscription": "A key belongs to the subscription it was issued for."})

    def _stored_state(self) -> dict[str, Any] | None:
        if self.pk is None:
            return None
        stored = type(self).objects.filter(pk=self.pk).values("subscription_id", "expires_at", "revoked_at").first()
        return dict(stored) if stored is not None else None

    def _expiry_changed(self, stored: dict[str, Any] | None) -> bool:
        return stored is None or stored["expires_at"] != self.expires_at

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def state(self) -> str:
        """One of :class:`KeyState`: revoked, else expired, else rolled (working until its overlap ends), else
        active."""
        if self.revoked_at is not None:
            return KeyState.REVOKED
        if self.is_expired:
            return KeyState.EXPIRED
        if self.rolled_to_id is not None:
            return KeyState.ROLLED
        return KeyState.ACTIVE

    @property
    def has_own_limits(self) -> bool:
        """Whether the key has a rate or a spending cap of its own."""
        return bool(self.own_rates or self.cap_period)

    def clean_own_limits(self) -> None:
        """Check the key's own rates and cap: a cap has a period and an amount, at most the subscription's budget
        of that period (a key is held below its subscription, never above it). Raises ValidationError."""
        if self.own_rates:
            try:
                validate_rates(self.own_rates)
            except ValidationError as exc:
                raise ValidationError({"own_rates": exc.messages}) from None
        if bool(self.cap_period) != (self.cap_amount is not None):
            raise ValidationError({"cap_amount": "A key's cap has a period and an amount, or neither."})
        if not self.cap_period or self.cap_amount is None:
            return
        check_below_budget(
            self.subscription, self.cap_period, self.cap_amount, fields=("cap_period", "cap_amount"),
            none="a key's cap to lower", lowers="a key's cap may only lower what its subscription may spend",
        )  # fmt: skip

    def revoke(self) -> None:
        """Revoke the key; requests with it get 401 from the next rules refresh on."""
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    @property
    def counters_id(self) -> int:
        """The id naming this key's own counters (its rate, cap and concurrency): the first key of its rolls."""
        return self.counters_of or self.pk

    def roll(
        self, overlap: timedelta, name: str | None = None, expires_at: datetime | None = None
    ) -> tuple[APIKey, str]:
        """Replace the key with a new one of the same subscription (named ``name``, else as this one): this one
        then works for ``overlap`` more (or until its own expiry, when that is sooner). The new key expires at
        ``expires_at`` when given, else when this one would have without the roll (never, for a key without an
        expiry). Returns the new key and its raw text. Raises :class:`ValueError` for a key that is revoked or
        expired (nothing to roll: issue a new key) or rolled already, and for an ``expires_at`` already past;
        call it in a transaction that has locked the row (``select_for_update``)."""
        if self.revoked_at is not None:
            raise ValueError("This key is revoked: it cannot be rolled. Create a new key instead.")
        if self.is_expired:
            raise ValueError("This key has expired: it cannot be rolled. Create a new key instead.")
        if self.rolled_to_id is not None:
            # A second roll would cut the link to the first replacement, which its holders already use.
            raise ValueError("This key was rolled already: roll the key that replaced it.")
        if _has_passed(expires_at):
            raise ValueError("This moment is in the past: the key would never work.")
        # A time-limited credential stays time-limited: rolling is replacing a key, not extending its life.
        new_expiry = self.expires_at if expires_at is None else expires_at
        new, raw = APIKey.issue(self.subscription, name=self.name if name is None else name, expires_at=new_expiry)
        # The replacement is held to what this key was (a CI job's key stays a CI job's), and spends the same
        # counters: what the key already spent of its own rate and cap this period still counts after the roll.
        new.own_rates, new.cap_period, new.cap_amount = self.own_rates, self.cap_period, self.cap_amount
        new.counters_of = self.counters_id
        new.save(update_fields=["own_rates", "cap_period", "cap_amount", "counters_of"])
        ends = timezone.now() + overlap
        if self.expires_at is None or ends < self.expires_at:
            self.expires_at = ends
        self.rolled_to = new
        self.save(update_fields=["expires_at", "rolled_to"])
        return new, raw


def _has_passed(moment: datetime | None) -> bool:
    return moment is not None and moment <= timezone.now()
