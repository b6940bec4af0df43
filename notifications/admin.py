"""Admin: endpoints (their secret shown once), contacts, and deliveries with a permission-checked "send again"."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from . import sender
from .events import EVENT_TYPES
from .models import Contact, Delivery, Endpoint
from .secrets import encrypt, new_secret


def _event_types(value: Any) -> list[str]:
    if value is None:  # the field left empty: [] (all events), as the model's default
        return []
    if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
        raise forms.ValidationError('A list of event types, e.g. ["budget.threshold_crossed"] ([]: all).')
    unknown = sorted(set(value) - set(EVENT_TYPES))
    if unknown:
        raise forms.ValidationError(f"Unknown event type {unknown[0]!r}: use {', '.join(EVENT_TYPES)}.")
    return value


class EndpointForm(forms.ModelForm):
    # A URL typed without a scheme is https:// (as Django 6 assumes): endpoints are https:// only by default.
    url = forms.URLField(max_length=500, assume_scheme="https", help_text="https:// URL the events are POSTed to.")

    class Meta:
        model = Endpoint
        fields = ("subscription", "url", "events", "description", "is_active")

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        try:
            sender.check_url(url)
        except sender.Refused as exc:
            raise forms.ValidationError(f"Not sent to: {exc}.") from exc
        except TimeoutError as exc:
            raise forms.ValidationError(f"Not checked: {exc}; try again later.") from exc
        return url

    def clean_events(self) -> list[str]:
        return _event_types(self.cleaned_data["events"])


class ContactForm(forms.ModelForm):
    class Meta:
        model = Contact
        fields = ("subscription", "email", "events", "is_active")

    def clean_events(self) -> list[str]:
        return _event_types(self.cleaned_data["events"])


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    form = EndpointForm
    list_display = ("url", "subscription", "events", "is_active", "consecutive_failures", "disabled_reason")
    list_filter = ("is_active",)
    search_fields = ("url", "subscription__name")
    readonly_fields = ("consecutive_failures", "disabled_reason", "previous_secret_expires_at", "created_at")

    def save_model(self, request: HttpRequest, obj: Endpoint, form: Any, change: bool) -> None:
        if not change:
            obj._new_secret = new_secret()  # type: ignore[attr-defined]  # shown once by response_add
            obj.secret_encrypted = encrypt(obj._new_secret)  # type: ignore[attr-defined]
        if change and "is_active" in form.changed_data and obj.is_active:
            obj.consecutive_failures, obj.disabled_reason = 0, ""  # enabled again: a fresh start
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: Endpoint, post_url_continue: str | None = None) -> HttpResponse:
        context = {**self.admin_site.each_context(request), "endpoint": obj, "secret": obj._new_secret}  # type: ignore[attr-defined]
        return TemplateResponse(request, "admin/quota_notifications/endpoint/secret.html", context)


@admin.register(Contact)
class ContactAdmin(admin.ModelAdmin):
    form = ContactForm
    list_display = ("email", "subscription", "events", "is_active", "confirmed_at")
    search_fields = ("email", "subscription__name")


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("event", "endpoint", "contact", "status", "attempts", "response_status", "failure",
                    "last_attempt_at", "next_attempt_at")  # fmt: skip
    list_filter = ("status", "failure", "event__type")
    search_fields = ("event__id", "endpoint__url", "contact__email")
    # error: the detail (the address a host resolved to, the resolver's message) for staff; customers see failure.
    readonly_fields = (
        "event", "endpoint", "contact", "status", "attempts", "next_attempt_at", "last_attempt_at",
        "response_status", "response_body", "failure", "error", "body", "created_at",
    )  # fmt: skip
    actions = ["send_again"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # deliveries come from events

    @admin.action(description="Send again", permissions=["change"])
    def send_again(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        """Queue the selected deliveries again, due now (the same event id: a receiver drops repeats)."""
        count = queryset.update(status=Delivery.Status.PENDING, next_attempt_at=timezone.now())
        self.message_user(request, f"{count} deliveries queued; the dispatcher sends them within seconds.",
                          messages.SUCCESS)  # fmt: skip
