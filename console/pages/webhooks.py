"""The page's webhooks section: register an endpoint (its secret shown once, in the answer), enable or disable
it, delete it, queue a test event for it, roll its secret (the new one shown once), and queue a delivery again."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from .. import webhooks
from ..access import Account
from ..errors import StateConflict
from .forms import ActiveForm, EndpointForm, RollForm, add_errors, problems
from .page import CONSEQUENCES, back, owner_action, render_page, unconfirmed


@owner_action
def register(request: HttpRequest, account: Account) -> HttpResponse:
    """Register an endpoint (``url``, ``events``, ``description``): 201 with the page and its secret shown once."""
    form = EndpointForm(request.POST)
    if form.is_valid():
        given = form.cleaned_data
        try:
            endpoint, secret = webhooks.register_endpoint(
                request, account, given["url"], given["events"], given["description"]
            )
        except ValidationError as exc:
            add_errors(form, exc)
        else:
            note = f"Endpoint {endpoint.url} is registered: its receiver checks each delivery's signature with it."
            return _reveal(request, account, secret, note, status=201)
    return render_page(request, account, status=400, failed=("webhooks", problems(form)), endpoint_form=form)


@owner_action
def active(request: HttpRequest, account: Account, endpoint_id: int) -> HttpResponse:
    """Enable (``is_active=true``: its failures forgotten) or disable (``false``) endpoint ``endpoint_id``."""
    endpoint = webhooks.endpoint_of(account, endpoint_id)
    form = ActiveForm(request.POST)
    if not form.is_valid():
        return render_page(request, account, status=400, failed=("webhooks", problems(form)))
    webhooks.update_endpoint(request, account, endpoint, {"is_active": form.cleaned_data["is_active"]})
    state = "enabled" if endpoint.is_active else "disabled: nothing is sent there"
    messages.success(request, f"Endpoint {endpoint.url} is {state}.")
    return back(account, "webhooks")


@owner_action
def delete(request: HttpRequest, account: Account, endpoint_id: int) -> HttpResponse:
    """Delete endpoint ``endpoint_id`` and its deliveries, once confirmed (:func:`unconfirmed`)."""
    endpoint = webhooks.endpoint_of(account, endpoint_id)
    asked = unconfirmed(
        request, account, "webhooks", question=f"Delete the endpoint {endpoint.url}?",
        consequence=CONSEQUENCES["webhook"], button="Delete this endpoint",
    )  # fmt: skip
    if asked is not None:
        return asked
    webhooks.delete_endpoint(request, account, endpoint)
    messages.success(request, f"Endpoint {endpoint.url} was deleted.")
    return back(account, "webhooks")


@owner_action
def send_test(request: HttpRequest, account: Account, endpoint_id: int) -> HttpResponse:
    """Queue a ``webhook.test`` event for endpoint ``endpoint_id``: the page shows it pending in the endpoint's
    latest deliveries, and its result there once the dispatcher sent it (409 with the page while the endpoint's
    previous test is pending)."""
    endpoint = webhooks.endpoint_of(account, endpoint_id)
    try:
        delivery = webhooks.send_test(request, account, endpoint)
    except StateConflict as exc:
        return render_page(request, account, status=409, failed=("webhooks", [str(exc)]))
    messages.success(
        request,
        f"Test event queued for {endpoint.url} (delivery {delivery.pk}): it is sent within seconds; reload the "
        "page to see the receiver's answer in the latest deliveries.",
    )
    return back(account, "webhooks")


@owner_action
def roll_secret(request: HttpRequest, account: Account, endpoint_id: int) -> HttpResponse:
    """Roll endpoint ``endpoint_id``'s secret (``overlap_seconds``: how long the old one signs too): the page with
    the new secret shown once."""
    endpoint = webhooks.endpoint_of(account, endpoint_id)
    form = RollForm(request.POST)
    if form.is_valid():
        try:
            secret = webhooks.roll_secret(request, account, endpoint, form.cleaned_data["overlap_seconds"])
        except ValidationError as exc:
            add_errors(form, exc)
        else:
            until = endpoint.previous_secret_expires_at
            old = f"until {until:%Y-%m-%d %H:%M} UTC" if until else "no longer"
            note = f"Endpoint {endpoint.url} has a new secret; the old one signs too {old}."
            return _reveal(request, account, secret, note, status=200)
    return render_page(request, account, status=400, failed=("webhooks", problems(form)))


@owner_action
def resend(request: HttpRequest, account: Account, delivery_id: int) -> HttpResponse:
    """Queue delivery ``delivery_id`` again, due now (409 with the page while it is pending already)."""
    delivery = webhooks.delivery_of(account, delivery_id)
    try:
        webhooks.resend_delivery(request, account, delivery)
    except StateConflict as exc:
        return render_page(request, account, status=409, failed=("webhooks", [str(exc)]))
    messages.success(request, f"Delivery {delivery.pk} ({delivery.event.type}) is queued: it is sent within seconds.")
    return back(account, "webhooks")


def _reveal(request: HttpRequest, account: Account, secret: str, note: str, status: int) -> HttpResponse:
    revealed = {"section": "webhooks", "title": "Your endpoint's signing secret", "value": secret, "note": note}
    return render_page(request, account, status=status, revealed=revealed)
