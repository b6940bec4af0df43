"""Endpoints and contacts a subscription registers, the events that happened to it, and their deliveries.

An event is written once (its ``dedupe_key`` is unique), with one delivery per endpoint and contact that wants
its type (unique per event and target), in the transaction of whatever raised it; the dispatcher
(:mod:`notifications.dispatch`, a Celery beat task) sends what is due after that commits. So a receiver gets each
event once per endpoint, unless it fails to answer 2xx (then it is retried, with the same event id).
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from plans.models import Subscription


def _no_events() -> list[str]:
    return []


class Endpoint(models.Model):
    """A URL a subscription's events are POSTed to, signed with the endpoint's secret."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField("URL", max_length=500, help_text="https:// URL the events are POSTed to.")
    # blank: [] (all events) is a value the admin's form must accept, not a missing one.
    events = models.JSONField(default=_no_events, blank=True, help_text="The event types sent here; empty: all.")
    description = models.CharField(max_length=200, blank=True)
    #: The signing secret, encrypted (notifications.secrets): it must be read back to sign each body.
    secret_encrypted = models.TextField(editable=False)
    #: The secret before the last roll, encrypted, signing beside the new one until ``previous_secret_expires_at``
    #: (so a receiver can switch secrets without losing a delivery); blank when there is none.
    previous_secret_encrypted = models.TextField(blank=True, editable=False)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    is_active = models.BooleanField(default=True, help_text="Off: nothing is sent here.")
    disabled_reason = models.CharField(max_length=200, blank=True, editable=False)
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "webhook endpoint"

    def __str__(self) -> str:
        return f"{self.subscription}: {self.url}"

    def wants(self, event_type: str) -> bool:
        return self.is_active and (not self.events or event_type in self.events)


class Contact(models.Model):
    """An e-mail address of a subscription's, with the event types it is sent."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="notification_contacts")
    email = models.EmailField()
    events = models.JSONField(default=_no_events, blank=True, help_text="The event types e-mailed; empty: all.")
    is_active = models.BooleanField(default=True)
    # Default now: staff (the admin) and code add confirmed addresses; the console's customers add theirs
    # unconfirmed (None), and nothing is sent there until the address's owner follows the confirmation link.
    confirmed_at = models.DateTimeField(
        null=True, blank=True, default=timezone.now,
        help_text="When the address confirmed it wants these e-mails; empty: unconfirmed, sent nothing.",
    )  # fmt: skip

    class Meta:
        verbose_name = "notification contact"
        constraints = [models.UniqueConstraint(fields=["subscription", "email"], name="one_contact_per_address")]

    def __str__(self) -> str:
        return f"{self.subscription}: {self.email}"

    def wants(self, event_type: str) -> bool:
        return self.is_active and self.confirmed_at is not None and (not self.events or event_type in self.events)


class Event(models.Model):
    """Something that happened to a subscription, once (``dedupe_key``), as its webhooks' body carries it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=50)
    subscription = models.ForeignKey(Subscription, null=True, on_delete=models.SET_NULL, related_name="+")
    dedupe_key = models.CharField(max_length=300, unique=True)
    data = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.type} {self.id}"


class Delivery(models.Model):
    """One event to one endpoint or contact: its attempts and what the receiver answered."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed (given up)"

    class Failure(models.TextChoices):
        """What kind of failure an attempt was: what a customer is shown (the detail, ``error``, is staff's)."""

        REFUSED_URL = "refused_url", "URL not allowed (scheme or port)"
        REFUSED_ADDRESS = "refused_address", "host unresolvable or not on a public address"
        TIMEOUT = "timeout", "no complete answer within TIMEOUT"
        CONNECTION_FAILED = "connection_failed", "connection failed"
        TLS = "tls", "TLS failed"
        HTTP_STATUS = "http_status", "answered a status other than 2xx"
        ENDPOINT_DISABLED = "endpoint_disabled", "endpoint disabled"
        MAIL_FAILED = "mail_failed", "e-mail not accepted"
        CONTACT_UNCONFIRMED = "contact_unconfirmed", "address not confirmed"

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(Endpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries")
    contact = models.ForeignKey(Contact, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    #: None once there is none (succeeded, or given up).
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True, help_text="The first 1,000 characters of the last answer.")
    error = models.CharField(
        max_length=300, blank=True, help_text="Why the last attempt failed, if it did (staff only)."
    )
    failure = models.CharField(
        max_length=20, choices=Failure.choices, blank=True,
        help_text="The kind of the last attempt's failure, if it failed: all its subscription is shown.",
    )  # fmt: skip
    body = models.TextField(help_text="The JSON body sent (webhooks), or the e-mail's text.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["event", "endpoint"], name="one_delivery_per_endpoint"),
            models.UniqueConstraint(fields=["event", "contact"], name="one_delivery_per_contact"),
            models.CheckConstraint(
                condition=models.Q(endpoint__isnull=False, contact__isnull=True)
                | models.Q(endpoint__isnull=True, contact__isnull=False),
                name="delivery_has_one_target",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} to {self.endpoint or self.contact}"
