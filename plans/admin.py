"""Admin for plans and their limits; every save refreshes the rules snapshot."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_permission_codename
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, Q, QuerySet, Value
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from quotas.api import lift_ban
from quotas.exceptions import StoreUnavailable
from quotas.formats.acl import covers_everyone, parse_network
from quotas.formats.money import format_money, from_micros
from quotas.internal_api import plan_multiplier, rules_snapshot, scaled

from .checks import DEFAULT_PLAN_HINT, covers_every_request, default_plan_warning
from .feeds import admin as feed_admin  # noqa: F401  (the feeds' admin lives with the feeds; this registers it)
from .feeds.share import over_ceiling
from .forms import IssueKeyForm, MovePlanForm
from .models import (
    ACLEntry,
    AlertThresholds,
    APIKey,
    ClientBan,
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
    verbose_name = "own budget (replaces the plan's for that period)"


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


class ACLKindFilter(admin.SimpleListFilter):
    title = "matches"
    parameter_name = "kind"

    #: The lookup selecting each kind (exactly one target is set, by constraint).
    LOOKUPS: dict[str, Q] = {
        ACLEntry.Kind.KEY: Q(api_key__isnull=False),
        ACLEntry.Kind.USER: Q(user__isnull=False),
        ACLEntry.Kind.SUBSCRIPTION: Q(subscription__isnull=False),
        ACLEntry.Kind.IP: ~Q(cidr=""),
    }

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return list(ACLEntry.Kind.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet[ACLEntry]) -> QuerySet[ACLEntry]:
        value = self.value()
        lookup = self.LOOKUPS.get(value) if value is not None else None
        return queryset.filter(lookup) if lookup is not None else queryset


class ACLStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("active", "Active"), ("expired", "Expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ACLEntry]) -> QuerySet[ACLEntry]:
        now = timezone.now()
        if self.value() == "active":
            return queryset.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        if self.value() == "expired":
            return queryset.filter(expires_at__lte=now)
        return queryset


class ACLEntryForm(ModelForm):
    def clean(self) -> dict[str, Any]:
        """An allow entry for a network is refused if, with every other network allowed (feeds included), it
        would pass ``QUOTAS['ACL_FEEDS']['MAX_ALLOW_SHARE']`` of the public addresses."""
        super().clean()
        cleaned = self.cleaned_data
        cidr, expires_at = cleaned.get("cidr"), cleaned.get("expires_at")
        if cleaned.get("action") != ACLEntry.Action.ALLOW or not cidr or (expires_at and expires_at <= timezone.now()):
            return cleaned
        try:
            network = parse_network(cidr)
        except ValueError:
            return cleaned  # the field's validator says why
        # A network of half a family or more is the model's to refuse (ACLEntry.clean), with its own message.
        why = not covers_everyone([network]) and over_ceiling([network], except_entry=self.instance.pk)
        if why:
            self.add_error("cidr", f"Allowing {network} is refused: {why}. Allow narrower networks.")
        return cleaned


@admin.register(ACLEntry)
class ACLEntryAdmin(admin.ModelAdmin):
    form = ACLEntryForm
    list_display = ("target", "action", "kind_label", "scope", "expires_at", "active", "reason", "created_by")
    list_filter = ("action", ACLKindFilter, ACLStatusFilter)
    search_fields = ("reason", "cidr")
    list_select_related = ("api_key__subscription", "user", "subscription__plan", "created_by")
    raw_id_fields = ("api_key", "user", "subscription")
    readonly_fields = ("created_at", "created_by")
    fieldsets = (
        (None, {"fields": ("action", "reason", "scope", "expires_at")}),
        ("Matches (exactly one)", {"fields": ("api_key", "user", "subscription", "cidr")}),
        ("Audit", {"fields": ("created_at", "created_by")}),
    )

    @admin.display(description="Matches")
    def kind_label(self, obj: ACLEntry) -> str:
        return obj.get_kind_display()

    @admin.display(description="Active", boolean=True)
    def active(self, obj: ACLEntry) -> bool:
        return not obj.is_expired

    def save_model(self, request: HttpRequest, obj: ACLEntry, form: ModelForm, change: bool) -> None:
        if not change and not isinstance(request.user, AnonymousUser):  # the admin is signed in
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


class ActiveBanFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("active", "Active"), ("over", "Expired or lifted")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ClientBan]) -> QuerySet[ClientBan]:
        now = timezone.now()
        if self.value() == "active":
            return queryset.filter(lifted_at__isnull=True, until__gt=now)
        if self.value() == "over":
            return queryset.exclude(lifted_at__isnull=True, until__gt=now)
        return queryset


@admin.register(ClientBan)
class ClientBanAdmin(admin.ModelAdmin):
    list_display = ("client", "subscription", "plan", "created_at", "until", "lifted_at", "lifted_by", "active")
    list_filter = (ActiveBanFilter, "plan")
    search_fields = ("client", "subscription__name")
    readonly_fields = ("client", "subscription", "plan", "until", "created_at", "lifted_at", "lifted_by")
    actions = ["lift"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # bans come from the engine's escalation

    @admin.display(boolean=True, description="Active")
    def active(self, obj: ClientBan) -> bool:
        return obj.is_active

    @admin.action(description="Lift selected bans now", permissions=["change"])
    def lift(self, request: HttpRequest, queryset: QuerySet[ClientBan]) -> None:
        if not self.has_change_permission(request):
            raise PermissionDenied
        lifted = 0
        for ban in queryset.filter(lifted_at__isnull=True):
            try:
                lift_ban("{" + ban.client + "}")
            except StoreUnavailable as exc:
                self.message_user(request, f"Could not reach Redis to lift {ban.client}: {exc}", messages.ERROR)
                continue
            ban.lifted_at = timezone.now()
            ban.lifted_by = request.user if not isinstance(request.user, AnonymousUser) else None
            ban.save(update_fields=["lifted_at", "lifted_by"])
            logger.warning("plans: %s lifted the ban of %s", request.user, ban.client)
            lifted += 1
        self.message_user(request, f"Lifted {lifted} ban(s).", messages.SUCCESS)


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
