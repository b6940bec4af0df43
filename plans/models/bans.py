"""Bans the engine's escalation imposed, recorded for the admin."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from .plans import Plan, Subscription


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
