"""Staff see every subscription's audit log (read-only: the log is evidence) and manage memberships."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import AuditEntry, Membership


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["subscription", "user", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["subscription__name", "user__username", "user__email"]
    autocomplete_fields = ["subscription", "user"]


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "subscription_name", "actor_name", "action", "target", "address"]
    list_filter = ["action"]
    search_fields = ["subscription_name", "actor_name", "target", "action"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
