"""A subscription's webhook endpoints and their deliveries: register, change, delete and test an endpoint, roll
its secret, queue a delivery again; the one implementation the API and the page both call.

The operations themselves are :mod:`notifications.manage`'s; these functions find the subscription's own
objects, check what they are given (Django's ``ValidationError``, naming the field) and write the audit log in the
change's transaction. A secret is returned once, by the function that made it (register, roll), and never
audited.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from rest_framework.request import Request

from notifications import manage
from notifications.models import Delivery, Endpoint
from notifications.summary import LATEST

from . import audit
from .access import Account
from .errors import Missing, StateConflict, field_errors
from .keys import check_overlap

NO_SUCH_ENDPOINT = "No such webhook endpoint on this subscription."
NO_SUCH_DELIVERY = "No such delivery on this subscription."
PENDING = "This delivery is pending already: the dispatcher sends it when it is due."
TEST_PENDING = (
    "This endpoint's last test event (delivery {delivery}) is still pending: the dispatcher sends it within "
    "seconds. One test at a time per endpoint: send another once its result is in."
)


def endpoints_of(account: Account) -> QuerySet[Endpoint]:
    """The subscription's endpoints, oldest first."""
    endpoints = Endpoint.objects.filter(subscription=account.subscription)
    return endpoints.select_related("subscription__plan").order_by("pk")


def endpoint_of(account: Account, endpoint_id: int) -> Endpoint:
    """Endpoint ``endpoint_id`` of the subscription; raises :class:`~console.errors.Missing` for any other."""
    endpoint = endpoints_of(account).filter(pk=endpoint_id).first()
    if endpoint is None:
        raise Missing(NO_SUCH_ENDPOINT)
    return endpoint


def deliveries_of(endpoint: Endpoint, latest: int = LATEST) -> QuerySet[Delivery]:
    """The endpoint's ``latest`` deliveries (test events included), newest first."""
    return endpoint.deliveries.select_related("event").order_by("-created_at", "-pk")[:latest]


def delivery_of(account: Account, delivery_id: int) -> Delivery:
    """Delivery ``delivery_id`` (to an endpoint or a contact) of the subscription; raises
    :class:`~console.errors.Missing` for any other."""
    delivery = (
        Delivery.objects.select_related("event", "endpoint", "contact")
        .filter(pk=delivery_id, event__subscription=account.subscription)
        .first()
    )
    if delivery is None:
        raise Missing(NO_SUCH_DELIVERY)
    return delivery


def register_endpoint(
    request: Request | HttpRequest, account: Account, url: str, events: Any = None, description: str = ""
) -> tuple[Endpoint, str]:
    """A new endpoint of the subscription (``events``: types, None or []: all) behind the SSRF guard, and its
    signing secret (to show once)."""
    with field_errors(), transaction.atomic():
        endpoint, secret = manage.register_endpoint(account.subscription, url, events, description)
        audit.record(request, account, "webhook.create", endpoint.url, id=endpoint.pk, events=endpoint.events)
    return endpoint, secret


def update_endpoint(
    request: Request | HttpRequest, account: Account, endpoint: Endpoint, changes: dict[str, Any]
) -> dict[str, Any]:
    """Apply ``changes`` (any of ``url``, ``events``, ``description``, ``is_active``); the fields that changed,
    with their new values (audited when there are any). Enabling a disabled endpoint forgets its failures."""
    with field_errors(), transaction.atomic():
        changed = manage.update_endpoint(endpoint, changes)
        if changed:
            audit.record(request, account, "webhook.update", endpoint.url, id=endpoint.pk, changed=changed)
    return changed


def delete_endpoint(request: Request | HttpRequest, account: Account, endpoint: Endpoint) -> None:
    """Delete the endpoint, and its deliveries with it."""
    with transaction.atomic():
        audit.record(request, account, "webhook.delete", endpoint.url, id=endpoint.pk)
        endpoint.delete()


def send_test(request: Request | HttpRequest, account: Account, endpoint: Endpoint) -> Delivery:
    """Queue a ``webhook.test`` event for the endpoint, due now, audited in the transaction that records it; the
    delivery, pending. The dispatcher sends it at its next run (every few seconds), so the request waits for
    the database alone, never for the receiver. Raises :class:`~console.errors.StateConflict` while the
    endpoint's previous test is pending."""

    def audited(delivery: Delivery) -> None:
        audit.record(request, account, "webhook.test", endpoint.url, id=endpoint.pk, delivery=delivery.pk)

    try:
        return manage.send_test(endpoint, then=audited)
    except manage.InFlight as exc:
        raise StateConflict(TEST_PENDING.format(delivery=exc.delivery.pk)) from exc


def roll_secret(request: Request | HttpRequest, account: Account, endpoint: Endpoint, overlap_seconds: int) -> str:
    """A new signing secret for the endpoint, returned (to show once); the old one signs beside it for
    ``overlap_seconds`` (0: it stops at once)."""
    check_overlap(overlap_seconds)
    with field_errors(), transaction.atomic():
        secret = manage.roll_secret(endpoint, overlap_seconds)
        until = endpoint.previous_secret_expires_at.isoformat() if endpoint.previous_secret_expires_at else None
        audit.record(request, account, "webhook.roll_secret", endpoint.url, id=endpoint.pk,
                     overlap_seconds=overlap_seconds, previous_valid_until=until)  # fmt: skip
    return secret


def resend_delivery(request: Request | HttpRequest, account: Account, delivery: Delivery) -> Delivery:
    """Queue the delivery again, due now (the dispatcher sends it within seconds); it, as it now is. One pending
    already raises :class:`~console.errors.StateConflict`."""
    to = delivery.endpoint.url if delivery.endpoint else delivery.contact.email if delivery.contact else ""
    with transaction.atomic():
        if not manage.resend(delivery):
            raise StateConflict(PENDING)
        audit.record(request, account, "delivery.resend", to, id=delivery.pk, event=str(delivery.event_id),
                     type=delivery.event.type)  # fmt: skip
    delivery.refresh_from_db()
    return delivery


__all__ = [
    "delete_endpoint", "deliveries_of", "delivery_of", "endpoint_of", "endpoints_of", "register_endpoint",
    "resend_delivery", "roll_secret", "send_test", "update_endpoint",
]  # fmt: skip
