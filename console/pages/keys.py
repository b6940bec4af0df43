"""The page's API keys section: create a key (its raw text shown once, in the answer), revoke one, roll one."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from plans.models import APIKey
from plans.models.caps import plan_currency
from quotas.formats.money import format_money

from .. import keys
from ..access import Account
from ..key_limits import set_key_limits
from .forms import KeyForm, KeyLimitsForm, RollForm, add_errors, problems
from .page import CONSEQUENCES, back, owner_action, render_page, unconfirmed


@owner_action
def create(request: HttpRequest, account: Account) -> HttpResponse:
    """Create a key (``name``, ``expires_at`` optional): 201 with the page and the key shown once."""
    form = KeyForm(request.POST)
    if form.is_valid():
        try:
            key, raw = keys.create_key(request, account, form.cleaned_data["name"], form.cleaned_data["expires_at"])
        except ValidationError as exc:
            add_errors(form, exc)
        else:
            note = f"Key {key.prefix}… ({key.name or 'no name'}) was created."
            return _reveal(request, account, raw, note, status=201)
    return render_page(request, account, status=400, failed=("keys", problems(form)), key_form=form)


@owner_action
def revoke(request: HttpRequest, account: Account, key_id: int) -> HttpResponse:
    """Revoke key ``key_id`` now (a revoked key stays as it was), once confirmed (:func:`unconfirmed`)."""
    key = keys.key_of(account, key_id)  # another subscription's key: a 404 before anything is asked
    asked = unconfirmed(
        request, account, "keys", question=f"Revoke key {key.prefix}… ({key.name or 'no name'})?",
        consequence=CONSEQUENCES["revoke"], button="Revoke this key",
    )  # fmt: skip
    if asked is not None:
        return asked
    key = keys.revoke_key(request, account, key_id)
    messages.success(request, f"Key {key.prefix}… is revoked: requests with it are refused within a second.")
    return back(account, "keys")


@owner_action
def roll(request: HttpRequest, account: Account, key_id: int) -> HttpResponse:
    """Roll key ``key_id`` (``overlap_seconds``: how long it works beside the new one): 201 with the page and the
    new key shown once."""
    form = RollForm(request.POST)
    if form.is_valid():
        try:
            old, new, raw = keys.roll_key(request, account, key_id, form.cleaned_data["overlap_seconds"])
        except ValidationError as exc:
            add_errors(form, exc)
        else:
            until = f"until {old.expires_at:%Y-%m-%d %H:%M} UTC" if old.expires_at else "no longer"
            note = f"Key {new.prefix}… replaces {old.prefix}…, which works {until}."
            return _reveal(request, account, raw, note, status=201)
    return render_page(request, account, status=400, failed=("keys", problems(form)))


@owner_action
def limits(request: HttpRequest, account: Account, key_id: int) -> HttpResponse:
    """Give key ``key_id`` its own rates and spending cap (empty: none), held below its subscription."""
    form = KeyLimitsForm(request.POST)
    if form.is_valid():
        given = form.cleaned_data
        try:
            key = set_key_limits(request, account, key_id, own_rates=given["own_rates"], cap_period=given["cap_period"],
                                 cap_amount=given["cap_amount"] if given["cap_period"] else None)  # fmt: skip
        except ValidationError as exc:
            add_errors(form, exc)
        else:
            messages.success(request, f"Key {key.prefix}… has its own limits: {_limits_text(key)}.")
            return back(account, "keys")
    return render_page(request, account, status=400, failed=("keys", problems(form)))


def _limits_text(key: APIKey) -> str:
    parts = [key.own_rates] if key.own_rates else []
    if key.cap_period and key.cap_amount is not None:
        parts.append(
            f"at most {format_money(key.cap_amount, plan_currency(key.subscription.plan_id))} a {key.cap_period}"
        )
    return ", ".join(parts) or "none (its plan's alone)"


def _reveal(request: HttpRequest, account: Account, raw: str, note: str, status: int) -> HttpResponse:
    revealed = {"section": "keys", "title": "Your new API key", "value": raw, "note": note}
    return render_page(request, account, status=status, revealed=revealed)
