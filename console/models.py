"""Who may act on a subscription, and what was done to it.

A subscription's ``user`` (the one it was made for) is its first owner without a row here; a
:class:`Membership` makes another Django user an ``owner`` (may change everything the self-service API offers)
or a ``member`` (may read it). Staff keep the admin. Every change made through the console is an
:class:`AuditEntry`, kept after its actor or subscription is gone (who and what are copied as text).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from plans.models import Subscription


class Role(models.TextChoices):
    OWNER = "owner", "Owner (manages keys, webhooks, contacts, caps and members)"
    MEMBER = "member", "Member (reads)"


class Membership(models.Model):
    """A Django user's role on a subscription."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quota_memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["subscription", "user"], name="one_role_per_user")]
        ordering = ["subscription", "user"]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.subscription}"


class AuditEntry(models.Model):
    """One change to a subscription: who made it, from where, when, and what it was."""

    subscription = models.ForeignKey(
        Subscription, null=True, on_delete=models.SET_NULL, related_name="audit_entries", db_index=True
    )
    subscription_name = models.CharField(max_length=200, help_text="The subscription, as it was named then.")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=200, help_text="Who acted, as they were named then.")
    action = models.CharField(max_length=50, help_text="What was done, e.g. key.create or webhook.roll_secret.")
    target = models.CharField(max_length=200, blank=True, help_text="What it was done to, e.g. a key's prefix.")
    detail = models.JSONField(default=dict, blank=True, help_text="The change's particulars (never a secret).")
    address = models.GenericIPAddressField(null=True, blank=True, help_text="The address it came from.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name}: {self.action} {self.target}".rstrip()


class ConfirmationMail(models.Model):
    """A confirmation link mailed to an address of a subscription: what :mod:`console.confirmations` counts. Rows
    older than the longest limit's window are deleted as the next is counted."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="+")
    email = models.EmailField(max_length=254, help_text="The address, in lower case.")
    sent_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["subscription", "sent_at"], name="confirmation_mail_recent")]

    def __str__(self) -> str:
        return f"{self.sent_at:%Y-%m-%d %H:%M:%S} {self.email}"
