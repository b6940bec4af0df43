"""Admin: the on/off switch, pinned multipliers, and the read-only history of changes."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .conf import adaptive_settings
from .models import AdaptiveConfig, AdaptiveSnapshot, MultiplierOverride


def _takes_effect(what: str) -> str:
    """When a pin's change reaches the limits: the controller publishes the multipliers on each run."""
    return (
        f"{what} takes effect at the adaptive controller's next run, within {adaptive_settings.INTERVAL:g} s "
        "(ADAPTIVE['INTERVAL']); until then the multipliers it published last stay in force."
    )


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

    def save_model(self, request: HttpRequest, obj: MultiplierOverride, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        self.message_user(request, _takes_effect("The pin"), messages.WARNING)

    def delete_model(self, request: HttpRequest, obj: MultiplierOverride) -> None:
        super().delete_model(request, obj)
        self.message_user(request, _takes_effect("Lifting the pin"), messages.WARNING)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MultiplierOverride]) -> None:
        super().delete_queryset(request, queryset)
        self.message_user(request, _takes_effect("Lifting the pins"), messages.WARNING)


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
