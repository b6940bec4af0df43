"""Admin of the allow and deny list feeds: their state at a glance, and a permission-checked 'Refresh now'.

Imported by ``plans.admin`` so that Django's admin autodiscovery registers it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from quotas.formats.acl import covers_everyone

from ..models import ACLEntry, ACLFeed
from .refresh import refresh_feeds
from .share import over_ceiling, parsed

#: Networks of the last good list shown on a feed's page.
PREVIEW_LINES = 20


class ACLFeedForm(forms.ModelForm):
    def clean(self) -> dict[str, Any]:
        """Switching a feed to allow, or enabling an allow feed, is refused if its last good list, with every
        other network allowed, would pass ``QUOTAS['ACL_FEEDS']['MAX_ALLOW_SHARE']`` of the public addresses."""
        super().clean()
        cleaned = self.cleaned_data
        stored = list(parsed(self.instance.networks()))
        # A list covering half a family or more is the model's to refuse (ACLFeed.clean), with its own message.
        if cleaned.get("action") == ACLEntry.Action.ALLOW and cleaned.get("enabled") and stored:
            why = not covers_everyone(stored) and over_ceiling(stored, except_feed=self.instance.pk)
            if why:
                self.add_error("action", f"This feed's list is refused: {why}.")
        return cleaned


@admin.register(ACLFeed)
class ACLFeedAdmin(admin.ModelAdmin):
    form = ACLFeedForm
    list_display = ("name", "action", "enabled", "source", "entry_count", "fetched_at", "status")
    list_filter = ("action", "enabled")
    search_fields = ("name", "source")
    readonly_fields = (
        "status", "entry_count", "fetched_at", "last_error", "last_error_at", "consecutive_failures",
        "entries_preview", "created_at",
    )  # fmt: skip
    fieldsets = (
        (None, {"fields": ("name", "action", "source", "enabled")}),
        ("Last fetch", {"fields": ("status", "fetched_at", "entry_count", "last_error", "last_error_at",
                                   "consecutive_failures", "entries_preview", "created_at")}),
    )  # fmt: skip
    actions = ["refresh_now"]

    @admin.display(description="Status")
    def status(self, obj: ACLFeed) -> str:
        """OK, failing (with the error, and whether a last good list is still applied), or not fetched yet."""
        now = timezone.now()
        if obj.is_failing:
            kept = (
                f"last good list of {obj.entry_count} networks still applied"
                if obj.fetched_at
                else "nothing applied yet"
            )
            since = f" ({timesince(obj.last_error_at, now)} ago)" if obj.last_error_at else ""
            return format_html('<span class="feed-failing">Failing{}: {}; {}</span>', since, obj.last_error, kept)
        if obj.fetched_at is None:
            return "Not fetched yet"
        return f"OK: {obj.entry_count} networks, fetched {timesince(obj.fetched_at, now)} ago"

    @admin.display(description=f"Networks (first {PREVIEW_LINES})")
    def entries_preview(self, obj: ACLFeed) -> str:
        return "\n".join(obj.networks()[:PREVIEW_LINES]) or "None yet"

    @admin.action(description="Refresh selected feeds now", permissions=["change"])
    def refresh_now(self, request: HttpRequest, queryset: QuerySet[ACLFeed]) -> None:
        """Fetch the selected feeds at once (as the scheduled task would) and say how each went."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        report = refresh_feeds(list(queryset))
        done = len(report.changed) + len(report.unchanged)
        self.message_user(request, f"Refreshed {done} feed(s) ({len(report.changed)} changed).", messages.SUCCESS)
        for name, error in report.failed.items():
            self.message_user(request, f"Feed {name} failed: {error}; its last good list is kept.", messages.ERROR)
