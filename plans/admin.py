"""Admin for plans and their limits, subscriptions and their keys; every save refreshes the rules snapshot.

Who may call at all (allow and deny list entries, bans) is :mod:`plans.access_admin`; the feeds' admin is
:mod:`plans.feeds.admin`; both are imported here so that Django's admin autodiscovery registers them.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, QuerySet, Value
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from quotas.exceptions import StoreUnavailable
from quotas.formats.money import format_money, from_micros
from quotas.internal_api import plan_multiplier, rules_snapshot, scaled

from . import access_admin  # noqa: F401  (the lists' and bans' admin; this registers it)
from .checks import DEFAULT_PLAN_HINT, covers_every_request, default_plan_warning
from .feeds import admin as feed_admin  # noqa: F401  (the feeds' admin lives with the feeds; this registers it)
from .forms import IssueKeyForm, MovePlanForm
from .models import (
    AlertThresholds,
    APIKey,
    CostBudget,
    EndpointLimit,
    GroupPlan,
    LimitOverride,
    PeriodQuota,
    Plan,
    SpendCap,
    Subscription,
    user_groups_field,
)

logger = logging.getLogger(__name__)


class EndpointLimitInline(admin.TabularInline):
    model = EndpointLimit
    extra = 0
    fields = (
        "name", "scope", "path_prefix", "methods", "countries", "algorithm", "rates",
        "burst", "weight", "max_delay", "shadow", "refund_on_error", "price",
    )  # fmt: skip


class OneCurrencyFormSet(BaseInlineFormSet):
    """Budgets added or changed together must share one currency (CostBudget.clean checks the stored ones)."""

    def clean(self) -> None:
        super().clean()
        currencies = {
            form.cleaned_data["currency"]
            for form in self.forms
            if getattr(form, "cleaned_data", None) and form.cleaned_data.get("currency")
            and not form.cleaned_data.get("DELETE")
        }  # fmt: skip
        if len(currencies) > 1:
            raise ValidationError(f"A plan has one currency: these budgets are in {', '.join(sorted(currencies))}.")


class PlanBudgetInline(admin.TabularInline):
    model = CostBudget
    formset = OneCurrencyFormSet
    fk_name = "plan"
    extra = 0
    fields = ("period", "amount", "currency")


class PeriodQuotaInline(admin.TabularInline):
    model = PeriodQuota
    extra = 0
    fields = ("name", "scope", "period", "units", "unit")


def effective_limits(plan: Plan) -> str:
    """HTML: what a client on ``plan`` gets now, from the live rules snapshot with the adaptive multiplier applied."""
    try:
        # Read where the runtime reads them: plans knows nothing of the adaptive app.
        multiplier = plan_multiplier(plan.pk)
        source = "published by the adaptive controller" if multiplier != 1.0 else "nominal: no reduction published"
    except StoreUnavailable:
        multiplier, source = 1.0, "Redis unreachable: nominal limits shown"
    rules = rules_snapshot().limits_for(plan.pk)
    rows = [
        (
            rule.name,
            rule.scope or rule.path_prefix or "every request",
            w.algorithm,
            f"{w.quota} / {w.period or f'{w.window} s'}",
            f"{scaled(w, multiplier)} / {w.period or f'{w.window} s'}",
        )
        for rule in rules
        for w in rule.windows
        if not w.is_budget
    ]
    budgets = [
        (w.policy, f"{format_money(from_micros(w.quota), w.currency)} per {w.period}")
        for r in rules
        for w in r.windows
        if w.is_budget
    ]
    if not rows and not budgets:
        return "No limit in force yet (save the plan; the rules snapshot reloads on commit)."
    return format_html(
        '<p>Multiplier now: <strong id="effective-multiplier">{}</strong> ({}).</p>'
        '<table id="effective-limits"><thead><tr><th>Limit</th><th>Matches</th><th>Algorithm</th>'
        "<th>Nominal</th><th>In force now</th></tr></thead><tbody>{}</tbody></table>{}",
        f"{multiplier:.2f}",
        source,
        format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows),
        format_html_join("", "<p>Budget {}: {} (never scaled)</p>", budgets),
    )


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "monthly_price", "priority", "is_default", "subscription_count")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [EndpointLimitInline, PeriodQuotaInline, PlanBudgetInline]
    readonly_fields = ("effective_limits_now",)

    @admin.display(description="Subscriptions")
    def subscription_count(self, obj: Plan) -> int:
        return obj.subscriptions.count()

    @admin.display(description="Effective limits now")
    def effective_limits_now(self, obj: Plan) -> str:
        return effective_limits(obj) if obj.pk else "Shown once the plan is saved."

    def save_related(self, request: HttpRequest, form: ModelForm, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        plan = form.instance
        # Judged once the inlines are saved: the limits are what decides (quota_plans.W001 says the same).
        if plan.is_default and not covers_every_request(plan):
            self.message_user(request, f"{default_plan_warning(plan)} {DEFAULT_PLAN_HINT}", messages.WARNING)


class LimitOverrideInline(admin.TabularInline):
    model = LimitOverride
    extra = 0


class SubscriptionBudgetInline(admin.TabularInline):
    model = CostBudget
    formset = OneCurrencyFormSet
    fk_name = "subscription"
    extra = 0
    fields = ("period", "amount", "currency")
    verbose_name = "own budget"
    # The plural is the inline's heading: Django would add an "s" after the parenthesis.
    verbose_name_plural = "own budgets (each replaces the plan's budget of its period)"


class APIKeyInline(admin.TabularInline):
    model = APIKey
    extra = 0
    fields = ("prefix", "name", "created_at", "expires_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # keys are issued by the subscription action or `manage.py issue_key` (raw key shown once)


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("name", "plan", "user", "started_on", "is_active")
    list_filter = ("plan", "is_active")
    search_fields = ("name", "user__username")
    raw_id_fields = ("user",)
    inlines = [LimitOverrideInline, SubscriptionBudgetInline, APIKeyInline]
    actions = ["move_to_plan", "issue_api_key"]

    # Every action names the permission it needs: Django then neither offers it nor runs it
    # (a POST naming it anyway included) for a user without that permission. Each action checks
    # again itself, so a future get_actions() override or a direct call cannot skip the check.
    @admin.action(description="Move selected subscriptions to another plan…", permissions=["change"])
    def move_to_plan(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> HttpResponse | None:
        """First an intermediate page choosing the plan; on "apply", the move (effective on the next request)."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        form = MovePlanForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            refusal = CostBudget.move_refusal(form.cleaned_data["plan"], list(queryset.values_list("pk", flat=True)))
            if refusal:  # a plan has one currency: asked again, nothing moved
                form.add_error("plan", refusal)
        if form.is_valid():
            target = form.cleaned_data["plan"]
            with transaction.atomic():
                # Overrides name limits of the old plan; they cannot apply on the new one.
                dropped, _ = (
                    LimitOverride.objects.filter(subscription__in=queryset).exclude(limit__plan=target).delete()
                )
                moved = 0
                for sub in queryset.exclude(plan=target):
                    sub.plan = target
                    sub.save(update_fields=["plan"])  # post_save refreshes the rules snapshot on commit
                    moved += 1
            note = f" and dropped {dropped} limit override(s) of the old plan" if dropped else ""
            self.message_user(request, f"Moved {moved} subscription(s) to {target}{note}.", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Move subscriptions to another plan",
            "opts": self.model._meta,
            "form": form,
            "subscriptions": queryset.select_related("plan"),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "action": "move_to_plan",
        }
        return TemplateResponse(request, "admin/quota_plans/subscription/move_plan.html", context)

    @admin.action(description="Issue a new API key for each selected subscription…", permissions=["add_apikey"])
    def issue_api_key(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> HttpResponse:
        """First an intermediate page asking for an optional expiry; on "issue", one key per subscription,
        the raw keys shown on that response only (never stored)."""
        if not self.has_add_apikey_permission(request):
            raise PermissionDenied  # also refused before it gets here; minting keys deserves a second look
        form = IssueKeyForm(request.POST if "issue" in request.POST else None)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "subscriptions": queryset.select_related("plan"),
        }
        if not form.is_valid():
            context.update(
                title="Issue API keys", form=form, action_checkbox_name=ACTION_CHECKBOX_NAME, action="issue_api_key"
            )
            return TemplateResponse(request, "admin/quota_plans/subscription/issue_keys.html", context)
        expires_at = form.cleaned_data["expires"]
        name = f"issued in admin by {request.user}"
        with transaction.atomic():
            issued = [(sub, APIKey.issue(sub, name=name, expires_at=expires_at)[1]) for sub in queryset]
            context.update(title="New API keys", issued=issued, expires_at=expires_at)
            response = TemplateResponse(request, "admin/quota_plans/subscription/issued_keys.html", context)
            # The page is the only place the raw keys ever appear: render it before the rows commit, so a page
            # that cannot be rendered (a missing template, say) rolls the keys back instead of leaving keys
            # nobody can read.
            response.render()
        logger.warning("plans: %s issued %d API key(s) in the admin", request.user, len(issued))
        response["Cache-Control"] = "no-store"  # the raw key must not be kept by any cache
        return response

    def has_add_apikey_permission(self, request: HttpRequest) -> bool:
        """Issuing a key is adding an API key, whoever's subscription it is for."""
        opts = APIKey._meta
        return request.user.has_perm(f"{opts.app_label}.{get_permission_codename('add', opts)}")


@admin.register(GroupPlan)
class GroupPlanAdmin(admin.ModelAdmin):
    """Which groups' members are on which plan when they have no active subscription (see GroupPlan)."""

    list_display = ("group", "plan", "plan_priority", "members")
    list_select_related = ("group", "plan")
    list_filter = ("plan",)
    search_fields = ("group__name", "plan__name", "plan__slug")
    fields = ("group", "plan", "created_at")
    readonly_fields = ("created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[GroupPlan]:
        queryset = super().get_queryset(request)
        field = user_groups_field()
        if field is None:  # a user model without groups: no one is a member
            return queryset.annotate(member_count=Value(0))
        return queryset.annotate(member_count=Count(f"group__{field.related_query_name()}"))

    @admin.display(description="Plan priority", ordering="plan__priority")
    def plan_priority(self, obj: GroupPlan) -> int:
        return obj.plan.priority

    @admin.display(description="Members", ordering="member_count")
    def members(self, obj: GroupPlan) -> int:
        return obj.member_count  # type: ignore[attr-defined]  # annotated by get_queryset


@admin.register(APIKey)
class APIKeyAdmin(admin.ModelAdmin):
    """API keys, without their hash: it is all a request needs to be looked up as the key (the rules
    backend finds subscribers by it), so it is never shown, searched or filtered on; the prefix names a key."""

    list_display = ("prefix", "name", "subscription", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("subscription__plan",)
    search_fields = ("prefix", "name", "subscription__name")
    # A key's subscription is fixed when it is issued (APIKey.clean): changing it would let anyone who may
    # change keys make their own key authenticate as another customer.
    readonly_fields = ("prefix", "subscription", "created_at", "last_used_at", "last_used_from", "rolled_to")
    fields = (
        "prefix", "name", "subscription", "expires_at", "revoked_at", "created_at", "last_used_at", "last_used_from",
        "rolled_to",
    )  # fmt: skip
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: APIKey | None = None) -> tuple[str, ...]:
        # Revocation and a reached expiry are final (APIKey.clean): the field is then shown, not offered.
        # Judged on the stored key: a form that failed validation has already written its values into ``obj``.
        readonly = tuple(super().get_readonly_fields(request, obj))
        stored = APIKey.objects.filter(pk=obj.pk).first() if obj is not None else None
        if stored is not None and stored.revoked_at is not None:
            readonly = (*readonly, "revoked_at")
        if stored is not None and stored.is_expired:
            readonly = (*readonly, "expires_at")
        return readonly

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        # Django allows a filter on any field of the model in the changelist's query string:
        # ?key_hash__startswith=... would let a viewer read the hash one character at a time.
        if lookup.split("__", 1)[0] == "key_hash":
            return False
        return super().lookup_allowed(lookup, value, request)

    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[APIKey]) -> None:
        if not self.has_change_permission(request):
            raise PermissionDenied
        count = 0
        for key in queryset.filter(revoked_at__isnull=True):
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
            count += 1
        self.message_user(request, f"Revoked {count} key(s).", messages.SUCCESS)


@admin.register(SpendCap)
class SpendCapAdmin(admin.ModelAdmin):
    """Customers set their caps themselves (the console); staff see them, and may lower or remove one."""

    list_display = ("subscription", "period", "amount", "updated_at")
    list_filter = ("period",)
    search_fields = ("subscription__name",)
    autocomplete_fields = ("subscription",)


@admin.register(AlertThresholds)
class AlertThresholdsAdmin(admin.ModelAdmin):
    """Customers set their thresholds themselves (the console); staff see them."""

    list_display = ("subscription", "percents", "updated_at")
    search_fields = ("subscription__name",)
    autocomplete_fields = ("subscription",)
