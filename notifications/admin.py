"""Admin: endpoints (their secret shown once), contacts (each within the fan-out limits a subscription has), and
deliveries with a permission-checked "send again"."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html

from . import sender
from .events import EVENT_CHOICES, EVENTS_DOCS_URL
from .manage import Invalid, check_room
from .models import Contact, Delivery, Endpoint
from .secrets import encrypt, new_secret


def _events_field() -> forms.MultipleChoiceField:
    """The event types as checkboxes, as the customer's page offers them (the model keeps a JSON list)."""
    return forms.MultipleChoiceField(
        choices=EVENT_CHOICES, required=False, widget=forms.CheckboxSelectMultiple,
        help_text=format_html('None ticked: every event type. <a href="{}">What each one sends</a>.', EVENTS_DOCS_URL),
    )  # fmt: skip


def _check_room(form: forms.ModelForm, kind: type[Endpoint | Contact]) -> None:
    """Refuse an endpoint or contact added to (or moved to) a subscription that has as many as the settings
    allow (:func:`notifications.manage.check_room`): staff are held to the fan-out limits as owners are."""
    subscription = form.cleaned_data.get("subscription")
    if subscription is None or subscription.pk == form.instance.subscription_id:
        return  # no subscription (its own error), or not a new one for this object
    try:
        with transaction.atomic():  # the admin's save runs in a transaction of its own too; the lock needs one
            check_room(subscription, kind, excluding=form.instance.pk)
    except Invalid as exc:
        raise forms.ValidationError(exc.message) from exc


class EndpointForm(forms.ModelForm):
    # A URL typed without a scheme is https:// (as Django 6 assumes): endpoints are https:// only by default.
    url = forms.URLField(
        label="URL", max_length=500, assume_scheme="https", help_text="https:// URL the events are POSTed to."
    )
    events = _events_field()

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

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        _check_room(self, Endpoint)
        return cleaned


class ContactForm(forms.ModelForm):
    events = _events_field()

    class Meta:
        model = Contact
        fields = ("subscription", "email", "events", "is_active")

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        _check_room(self, Contact)
        return cleaned


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
