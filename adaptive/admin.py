"""Admin: the on/off switch, pinned multipliers, and the read-only history of changes."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from .models import AdaptiveConfig, AdaptiveSnapshot, MultiplierOverride


@admin.register(AdaptiveConfig)
class AdaptiveConfigAdmin(admin.ModelAdmin):
    list_display = ("__str__", "enabled", "updated_at")
    fields = ("enabled", "updated_at")
    readonly_fields = ("updated_at",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not AdaptiveConfig.objects.exists()  # a single row

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(MultiplierOverride)
class MultiplierOverrideAdmin(admin.ModelAdmin):
    list_display = ("plan", "multiplier", "expires_at", "active", "reason", "created_at")
    list_filter = ("plan",)
    search_fields = ("reason", "plan__slug")
    readonly_fields = ("created_at",)

    @admin.display(boolean=True, description="Active")
    def active(self, obj: MultiplierOverride) -> bool:
        return obj.is_active


@admin.register(AdaptiveSnapshot)
class AdaptiveSnapshotAdmin(admin.ModelAdmin):
    list_display = ("created_at", "level", "multipliers", "reason")
    date_hierarchy = "created_at"
    search_fields = ("reason",)
    readonly_fields = ("created_at", "level", "signals", "multipliers", "reason")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
