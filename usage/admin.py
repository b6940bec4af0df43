"""Read-only admin for usage records and budget alerts: they are written by the flush and the engine."""

from __future__ import annotations

from decimal import Decimal

from django.contrib import admin
from django.http import HttpRequest

from .models import BudgetAlert, UsageRecord


class ReadOnlyAdmin(admin.ModelAdmin):
    """Lists and details only: no add, change or delete (copies of Redis counters, or history)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = (
        "day", "client", "subscription", "plan", "scope", "allowed", "denied_rate", "denied_budget",
        "denied_acl", "denied_capacity", "denied_banned", "shadow_would_deny", "weight", "cost_display",
        "updated_at",
    )  # fmt: skip
    list_filter = ("day", "plan", "scope")
    search_fields = ("client", "subscription__name")
    date_hierarchy = "day"
    list_select_related = ("subscription", "plan")
    show_full_result_count = False  # the table grows by a row per client, scope and day

    @admin.display(description="Cost", ordering="cost_micros")
    def cost_display(self, obj: UsageRecord) -> Decimal:
        return obj.cost


@admin.register(BudgetAlert)
class BudgetAlertAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "client", "subscription", "budget", "threshold", "spent", "amount", "period_start")
    list_filter = ("threshold", "budget")
    search_fields = ("client", "subscription__name", "budget")
    date_hierarchy = "created_at"
    list_select_related = ("subscription",)
