"""The customer's page: the same actions as the self-service API, as plain HTML forms that work without
JavaScript (each a POST with Django's CSRF token, answered by a redirect back to its section, or by the page
again with the form's errors and a 400).

``/usage/account/`` lists the subscriptions the signed-in user has a role on; ``/usage/account/<id>/`` is one
subscription: what everyone with a role reads, and the forms only owners get. Permissions are
:mod:`console.access`'s, checked again on every POST: a form hidden from a member is refused all the same.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from rest_framework import exceptions

from . import caps
from .access import Account, account_for, require_owner, roles_of
from .api.account import AUDIT_PAGE
from .models import AuditEntry


class CapForm(forms.Form):
    period = forms.ChoiceField(choices=[(p, p) for p in caps.PERIODS])
    amount = forms.DecimalField(max_digits=14, decimal_places=6, min_value=Decimal(0), required=False)
    action = forms.ChoiceField(choices=[("set", "set"), ("remove", "remove")], initial="set")


class ThresholdsForm(forms.Form):
    percents = forms.CharField(
        required=False, max_length=100, help_text="Whole percentages, separated by commas, e.g. 50, 75, 90."
    )

    def clean_percents(self) -> list[int]:
        text = self.cleaned_data["percents"].replace(" ", "")
        try:
            return [int(part) for part in text.split(",") if part]
        except ValueError:
            raise ValidationError("Whole percentages, separated by commas, e.g. 50, 75, 90.") from None


class SignInView(auth_views.LoginView):
    """Owners and members sign in with their Django user (never with an API key: a key cannot manage)."""

    template_name = "console/sign_in.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self) -> str:
        return reverse("console-page:index")


@require_GET
@login_required(login_url="console-page:sign-in")
def index(request: HttpRequest) -> HttpResponse:
    """The subscriptions the signed-in user has a role on."""
    return render(request, "console/index.html", {"rows": roles_of(request.user)})


@require_GET
@login_required(login_url="console-page:sign-in")
def subscription(request: HttpRequest, subscription_id: int) -> HttpResponse:
    """One subscription: its caps, thresholds and (owners) audit log, with the forms the caller may use."""
    return _page(request, _account(request, subscription_id))


@require_POST
@login_required(login_url="console-page:sign-in")
def cap(request: HttpRequest, subscription_id: int) -> HttpResponse:
    account = _owner(request, subscription_id)
    form = CapForm(request.POST)
    if form.is_valid():
        period, amount = form.cleaned_data["period"], form.cleaned_data["amount"]
        if form.cleaned_data["action"] == "remove":
            caps.remove_cap(request, account, period)
            messages.success(request, f"The {period} cap was removed.")
            return _back(account, "caps")
        if amount is None:
            form.add_error("amount", "Give the cap's amount.")
        else:
            try:
                caps.set_cap(request, account, period, amount)
            except ValidationError as exc:
                _errors(form, exc)
            else:
                messages.success(request, f"The {period} cap is now {caps.money(amount)}.")
                return _back(account, "caps")
    return _page(request, account, status=400, cap_form=form)


@require_POST
@login_required(login_url="console-page:sign-in")
def thresholds(request: HttpRequest, subscription_id: int) -> HttpResponse:
    account = _owner(request, subscription_id)
    form = ThresholdsForm(request.POST)
    if form.is_valid():
        try:
            kept = caps.set_thresholds(request, account, form.cleaned_data["percents"])
        except ValidationError as exc:
            _errors(form, exc)
        else:
            shown = ", ".join(f"{p} %" for p in kept) or "none"
            messages.success(request, f"Alert thresholds: {shown}.")
            return _back(account, "thresholds")
    return _page(request, account, status=400, thresholds_form=form)


def _page(request: HttpRequest, account: Account, status: int = 200, **forms_given: Any) -> HttpResponse:
    standing = caps.caps_of(account)
    context = {
        "account": account,
        "subscription": account.subscription,
        "periods": standing["periods"],
        "thresholds": standing["thresholds"],
        "cap_form": forms_given.get("cap_form") or CapForm(),
        "thresholds_form": forms_given.get("thresholds_form")
        or ThresholdsForm(initial={"percents": ", ".join(str(p) for p in standing["thresholds"])}),
        "audit": AuditEntry.objects.filter(subscription=account.subscription)[:AUDIT_PAGE] if account.is_owner else (),
    }
    return render(request, "console/subscription.html", context, status=status)


def _account(request: HttpRequest, subscription_id: int) -> Account:
    try:
        return account_for(request, subscription_id)  # type: ignore[arg-type]  # reads request.user alone
    except exceptions.NotFound:
        raise Http404("No such subscription, or you have no role on it.") from None


def _owner(request: HttpRequest, subscription_id: int) -> Account:
    account = _account(request, subscription_id)
    try:
        require_owner(account)
    except exceptions.PermissionDenied as exc:
        raise PermissionDenied(str(exc.detail)) from None
    return account


def _errors(form: forms.Form, exc: ValidationError) -> None:
    for field, problems in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, problems)


def _back(account: Account, section: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("console-page:subscription", args=[account.subscription.pk]) + f"#{section}")
