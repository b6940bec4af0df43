"""Admin for plans and their limits; every save refreshes the rules snapshot."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from .models import APIKey, CostBudget, EndpointLimit, LimitOverride, PeriodQuota, Plan, Subscription


class EndpointLimitInline(admin.TabularInline):
    model = EndpointLimit
    extra = 0
    fields = (
        "name", "scope", "path_prefix", "methods", "algorithm", "rates",
        "burst", "weight", "max_delay", "shadow", "refund_on_error", "price",
    )  # fmt: skip


class PlanBudgetInline(admin.TabularInline):
    model = CostBudget
    fk_name = "plan"
    extra = 0
    fields = ("period", "amount", "currency")


class PeriodQuotaInline(admin.TabularInline):
    model = PeriodQuota
    extra = 0
    fields = ("name", "scope", "period", "units", "unit")


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "monthly_price", "priority", "is_default", "subscription_count")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [EndpointLimitInline, PeriodQuotaInline, PlanBudgetInline]

    @admin.display(description="Subscriptions")
    def subscription_count(self, obj: Plan) -> int:
        return obj.subscriptions.count()


class LimitOverrideInline(admin.TabularInline):
    model = LimitOverride
    extra = 0


class SubscriptionBudgetInline(admin.TabularInline):
    model = CostBudget
    fk_name = "subscription"
    extra = 0
    fields = ("period", "amount", "currency")
    verbose_name = "own budget (replaces the plan's for that period)"


class APIKeyInline(admin.TabularInline):
    model = APIKey
    extra = 0
    fields = ("prefix", "name", "created_at", "revoked_at")
    readonly_fields = ("prefix", "created_at")
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # keys are issued with `manage.py issue_key`, which shows the raw key once


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("name", "plan", "user", "started_on", "is_active")
    list_filter = ("plan", "is_active")
    search_fields = ("name", "user__username")
    raw_id_fields = ("user",)
    inlines = [LimitOverrideInline, SubscriptionBudgetInline, APIKeyInline]


@admin.register(APIKey)
class APIKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "subscription", "created_at", "revoked_at")
    list_filter = ("subscription__plan",)
    search_fields = ("prefix", "name", "subscription__name")
    readonly_fields = ("prefix", "key_hash", "created_at")
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke selected API keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[APIKey]) -> None:
        count = 0
        for key in queryset.filter(revoked_at__isnull=True):
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
            count += 1
        self.message_user(request, f"Revoked {count} key(s).", messages.SUCCESS)
