"""Admin for who may call at all: allow and deny list entries (an address, a network, a key or a user; for
good or until a time) and the bans the engine recorded, which staff may lift. Imported by :mod:`plans.admin`, so
Django's admin autodiscovery registers it."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone

from quotas.api import lift_ban
from quotas.exceptions import StoreUnavailable
from quotas.formats.acl import covers_everyone, parse_network

from .feeds.share import over_ceiling
from .models import (
    ACLEntry,
    ClientBan,
)

logger = logging.getLogger("plans.admin")  # where the plans admin's actions have always been logged


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
