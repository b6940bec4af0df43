"""The page's caps and thresholds section: set or remove a period's cap, set the alert thresholds."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from plans.models.caps import plan_currency
from quotas.formats.money import format_money

from .. import caps
from ..access import Account
from .forms import CapForm, ThresholdsForm, add_errors
from .page import CONSEQUENCES, back, owner_action, render_page, unconfirmed


@owner_action
def cap(request: HttpRequest, account: Account) -> HttpResponse:
    """Set (``action=set``, an ``amount``) or remove (``action=remove``, once confirmed: :func:`unconfirmed`)
    the cap of a ``period``."""
    form = CapForm(request.POST)
    if form.is_valid():
        period, amount = form.cleaned_data["period"], form.cleaned_data["amount"]
        if form.cleaned_data["action"] == "remove":
            asked = unconfirmed(
                request, account, "caps", question=f"Remove the {period} cap?", consequence=CONSEQUENCES["cap"],
                button="Remove the cap", keep={"period": period, "action": "remove"},
            )  # fmt: skip
            if asked is not None:
                return asked
            caps.remove_cap(request, account, period)
            messages.success(request, f"The {period} cap was removed.")
            return back(account, "caps")
        if amount is None:
            form.add_error("amount", "Give the cap's amount.")
        else:
            try:
                caps.set_cap(request, account, period, amount)
            except ValidationError as exc:
                add_errors(form, exc)
            else:
                currency = plan_currency(account.subscription.plan_id)
                messages.success(request, f"The {period} cap is now {format_money(amount, currency)}.")
                return back(account, "caps")
    return render_page(request, account, status=400, cap_form=form)


@owner_action
def thresholds(request: HttpRequest, account: Account) -> HttpResponse:
    """Set the alert thresholds (``percents``: whole percentages separated by commas; empty: none)."""
    form = ThresholdsForm(request.POST)
    if form.is_valid():
        try:
            kept = caps.set_thresholds(request, account, form.cleaned_data["percents"])
        except ValidationError as exc:
            add_errors(form, exc)
        else:
            shown = ", ".join(f"{p} %" for p in kept) or "none"
            messages.success(request, f"Alert thresholds: {shown}.")
            return back(account, "thresholds")
    return render_page(request, account, status=400, thresholds_form=form)
