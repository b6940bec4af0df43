"""What a subscription's owners do to its webhooks, as plain functions that know no HTTP (the console's API calls
them): register and edit an endpoint behind the SSRF guard, roll its secret with an overlap, queue a test event
for it (at most one pending), and queue a delivery again.

A value that cannot be accepted raises :class:`Invalid`, naming the field (or Django's ``NON_FIELD_ERRORS``) and
why; so does one endpoint or contact more than the settings allow a subscription (:func:`check_room`). None of
them writes the audit log: the caller does, in the transaction of the change (:func:`send_test` hands it that
transaction).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.db import transaction
from django.utils import timezone

from plans.models import Subscription

from . import events, sender
from .conf import notification_settings
from .events import EVENT_TYPES, WEBHOOK_TEST
from .models import Contact, Delivery, Endpoint, Event
from .secrets import encrypt, new_secret

#: The fields of an endpoint its owner may change.
EDITABLE = ("url", "events", "description", "is_active")


class Invalid(ValueError):
    """A value a subscription's owner gave that cannot be accepted: ``field`` and what is wrong with it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def event_types(value: Any, field: str = "events") -> list[str]:
    """``value`` as a list of known event types (``[]``: all); raises :class:`Invalid` otherwise."""
    if value is None:
        return []
    if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
        raise Invalid(field, 'A list of event types, e.g. ["budget.threshold_crossed"] ([]: all).')
    unknown = sorted(set(value) - set(EVENT_TYPES))
    if unknown:
        raise Invalid(field, f"Unknown event type {unknown[0]!r}: use {', '.join(EVENT_TYPES)}.")
    return list(dict.fromkeys(value))


def refusal_reason(exc: sender.Refused) -> str:
    """Why a URL was refused, as its owner may be told: a refused address never names what the host resolved to
    (the customer would otherwise learn which names resolve inside the platform's network, and to what)."""
    if exc.kind == "address":
        return "its host does not resolve, or does not resolve to a public address"
    return str(exc)


def checked_url(url: str) -> str:
    """``url`` once the SSRF guard allows it (:func:`notifications.sender.check_url`, the admin's); raises
    :class:`Invalid` naming why not."""
    try:
        sender.check_url(url)
    except sender.Refused as exc:
        raise Invalid("url", f"Not sent to: {refusal_reason(exc)}.") from exc
    except TimeoutError as exc:  # a slow resolver: says nothing of where the name leads
        raise Invalid("url", f"Not checked: {exc}; try again later.") from exc
    return url


def check_room(subscription: Subscription, kind: type[Endpoint | Contact], excluding: int | None = None) -> None:
    """Raise :class:`Invalid` (not of one field) when ``subscription`` has as many endpoints or contacts
    (``kind``) as ``MAX_ENDPOINTS`` or ``MAX_CONTACTS`` allow, besides the one ``excluding`` names (an object
    moved to it): each event fans out to every one of them. Call it in the transaction that adds one: it locks
    the subscription's row, so two additions at once cannot both find room for one (PostgreSQL; SQLite runs one
    writing transaction at a time)."""
    setting, noun = ("MAX_ENDPOINTS", "webhook endpoints") if kind is Endpoint else ("MAX_CONTACTS", "contacts")
    most = int(getattr(notification_settings, setting))
    Subscription.objects.select_for_update().filter(pk=subscription.pk).first()
    others = kind.objects.filter(subscription=subscription)
    count = (others.exclude(pk=excluding) if excluding is not None else others).count()
    if count >= most:
        raise Invalid(
            NON_FIELD_ERRORS,
            f"This subscription has {count} {noun}, the most allowed (QUOTAS['NOTIFICATIONS']['{setting}']): "
            "delete one first.",
        )


def register_endpoint(
    subscription: Subscription, url: str, event_list: Any = None, description: str = ""
) -> tuple[Endpoint, str]:
    """A new endpoint of ``subscription`` and its signing secret (to show once: only its encryption is kept);
    :class:`Invalid` when it has as many as ``MAX_ENDPOINTS`` already (:func:`check_room`)."""
    wanted = event_types(event_list)  # first: it needs no DNS lookup
    url = checked_url(url)
    secret = new_secret()
    with transaction.atomic():
        check_room(subscription, Endpoint)
        endpoint = Endpoint.objects.create(
            subscription=subscription, url=url, events=wanted, description=description,
            secret_encrypted=encrypt(secret),
        )  # fmt: skip
    return endpoint, secret


def update_endpoint(endpoint: Endpoint, changes: dict[str, Any]) -> dict[str, Any]:
    """Apply ``changes`` (of :data:`EDITABLE`) to ``endpoint``; the fields that changed, with their new values.

    A new URL passes the SSRF guard first; enabling a disabled endpoint starts it afresh (no failures counted)."""
    changed: dict[str, Any] = {}
    for name in EDITABLE:
        if name not in changes:
            continue
        value = changes[name]
        if name == "url" and value != endpoint.url:
            value = checked_url(value)
        elif name == "events":
            value = event_types(value)
        if value != getattr(endpoint, name):
            changed[name] = value
    for name, value in changed.items():
        setattr(endpoint, name, value)
    fields = list(changed)
    if changed.get("is_active") is True:
        endpoint.consecutive_failures, endpoint.disabled_reason = 0, ""  # enabled again: a fresh start
        fields += ["consecutive_failures", "disabled_reason"]
    if fields:
        endpoint.save(update_fields=fields)
    return changed


def roll_secret(endpoint: Endpoint, overlap_seconds: int, now: datetime | None = None) -> str:
    """Give ``endpoint`` a new signing secret, returned (to show once). The current one keeps signing beside it
    for ``overlap_seconds`` from ``now`` (0: it stops at once); a secret rolled before is dropped."""
    if overlap_seconds < 0:
        raise Invalid("overlap_seconds", "Must be 0 or more.")
    now = now or timezone.now()
    secret = new_secret()
    if overlap_seconds:
        # Kept as it is stored, encrypted: it is only ever decrypted to sign.
        endpoint.previous_secret_encrypted = endpoint.secret_encrypted
        endpoint.previous_secret_expires_at = now + timedelta(seconds=overlap_seconds)
    else:
        endpoint.previous_secret_encrypted, endpoint.previous_secret_expires_at = "", None
    endpoint.secret_encrypted = encrypt(secret)
    endpoint.save(update_fields=["secret_encrypted", "previous_secret_encrypted", "previous_secret_expires_at"])
    return secret


class InFlight(Exception):
    """The endpoint's previous test, ``delivery``, is still pending: one test at a time per endpoint."""

    def __init__(self, delivery: Delivery) -> None:
        super().__init__(f"test delivery {delivery.pk} of endpoint {delivery.endpoint_id} is still pending")
        self.delivery = delivery


def pending_test(endpoint: Endpoint) -> Delivery | None:
    """``endpoint``'s test waiting for the dispatcher or being sent, if there is one."""
    queued = Delivery.objects.filter(
        endpoint=endpoint, event__type=WEBHOOK_TEST, status=Delivery.Status.PENDING, next_attempt_at__isnull=False
    )
    return queued.first()


def send_test(
    endpoint: Endpoint, *, now: datetime | None = None, then: Callable[[Delivery], object] | None = None
) -> Delivery:
    """Queue a ``webhook.test`` event for ``endpoint`` alone, due ``now``, whatever event types it wants; the
    dispatcher (:mod:`notifications.dispatch`) sends it at its next run, signed as every delivery is: one
    attempt, never retried, not counted toward disabling the endpoint, and sent even while the endpoint is
    disabled (its owner may test it before enabling it). Returns its :class:`Delivery`, pending; ``then`` is
    called with it in the transaction that records it.

    Nothing is sent from here, so a web request that calls it waits for the database alone, never for a
    receiver. Raises :class:`InFlight` while the endpoint's previous test is pending: an owner cannot make one
    endpoint's receiver the target of a queue of tests."""
    now = now or timezone.now()
    subscription = endpoint.subscription
    event_id = uuid.uuid4()
    data = {
        "subscription": {"id": subscription.pk, "name": subscription.name, "plan": subscription.plan.slug},
        "endpoint": endpoint.pk,
        "url": endpoint.url,
    }
    created = now.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    with transaction.atomic():
        # The endpoint's row locked: two requests at once cannot both find no test pending (PostgreSQL; SQLite
        # runs one writing transaction at a time).
        Endpoint.objects.select_for_update().filter(pk=endpoint.pk).first()
        pending = pending_test(endpoint)
        if pending is not None:
            raise InFlight(pending)
        event = Event.objects.create(
            id=event_id, type=WEBHOOK_TEST, subscription=subscription,
            dedupe_key=f"{WEBHOOK_TEST}:{endpoint.pk}:{event_id}", data=data, created_at=now,
        )  # fmt: skip
        delivery = Delivery.objects.create(
            event=event, endpoint=endpoint, body=events.body(str(event_id), WEBHOOK_TEST, created, data),
            next_attempt_at=now,
        )  # fmt: skip
        delivery.event, delivery.endpoint = event, endpoint
        if then is not None:
            then(delivery)
    return delivery


def resend(delivery: Delivery, now: datetime | None = None) -> bool:
    """Queue ``delivery`` again, due ``now``: the dispatcher sends the same body (the same event id, so a
    receiver that has it drops the repeat) within seconds. False when it is pending already (queued, or being
    sent): sending it twice at once is what the dispatcher's claims exist to prevent. A pending one with no
    next attempt is one no dispatcher will ever send (a test whose request died while sending it, when tests
    were sent by the request; now they are queued as any delivery): it may be queued."""
    queued = (
        Delivery.objects.filter(pk=delivery.pk)
        .exclude(status=Delivery.Status.PENDING, next_attempt_at__isnull=False)
        .update(status=Delivery.Status.PENDING, next_attempt_at=now or timezone.now())
    )
    return bool(queued)
