"""What a subscription's owners do to its webhooks, as plain functions that know no HTTP (the console's API calls
them): register and edit an endpoint behind the SSRF guard, roll its secret with an overlap, send it a test
event now, and queue a delivery again.

A value that cannot be accepted raises :class:`Invalid`, naming the field and why. None of them writes the audit
log: the caller does, in the transaction of the change (:func:`send_test` hands it that transaction).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from plans.models import Subscription

from . import events, sender
from .dispatch import job_for
from .events import EVENT_TYPES, WEBHOOK_TEST
from .lanes import send_one
from .models import Delivery, Endpoint, Event
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


def register_endpoint(
    subscription: Subscription, url: str, event_list: Any = None, description: str = ""
) -> tuple[Endpoint, str]:
    """A new endpoint of ``subscription`` and its signing secret (to show once: only its encryption is kept)."""
    wanted = event_types(event_list)  # first: it needs no DNS lookup
    url = checked_url(url)
    secret = new_secret()
    endpoint = Endpoint.objects.create(
        subscription=subscription, url=url, events=wanted, description=description, secret_encrypted=encrypt(secret)
    )
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


def send_test(
    endpoint: Endpoint,
    *,
    now: datetime | None = None,
    clock: Callable[[], float] = time.time,
    then: Callable[[Delivery], object] | None = None,
) -> Delivery:
    """Send ``endpoint`` a ``webhook.test`` event now, signed as every delivery is (``clock``: the Unix time it
    is signed with), whatever event types it wants and even while it is disabled (its owner may test it before
    enabling it). Returns its :class:`Delivery`, settled: one attempt, never retried, not counted toward
    disabling the endpoint. ``then`` is called with it in the transaction that saves the outcome.

    No transaction is held while the receiver answers (up to ``TIMEOUT`` seconds)."""
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
        event = Event.objects.create(
            id=event_id, type=WEBHOOK_TEST, subscription=subscription,
            dedupe_key=f"{WEBHOOK_TEST}:{endpoint.pk}:{event_id}", data=data, created_at=now,
        )  # fmt: skip
        # No next attempt: the dispatcher never picks it up while this request sends it.
        delivery = Delivery.objects.create(
            event=event, endpoint=endpoint, body=events.body(str(event_id), WEBHOOK_TEST, created, data),
            next_attempt_at=None,
        )  # fmt: skip
    delivery.event, delivery.endpoint = event, endpoint
    outcome = send_one(job_for(delivery), clock)
    delivery.attempts, delivery.last_attempt_at = 1, now
    delivery.status = Delivery.Status.SUCCEEDED if outcome.ok else Delivery.Status.FAILED
    delivery.response_status, delivery.response_body = outcome.status, outcome.answer
    delivery.failure, delivery.error = outcome.failure, outcome.error[:300]
    with transaction.atomic():
        delivery.save()
        if then is not None:
            then(delivery)
    return delivery


def resend(delivery: Delivery, now: datetime | None = None) -> bool:
    """Queue ``delivery`` again, due ``now``: the dispatcher sends the same body (the same event id, so a
    receiver that has it drops the repeat) within seconds. False when it is pending already (queued, or being
    sent): sending it twice at once is what the dispatcher's claims exist to prevent. A pending one with no
    next attempt is a test whose request died while sending: it may be queued."""
    queued = (
        Delivery.objects.filter(pk=delivery.pk)
        .exclude(status=Delivery.Status.PENDING, next_attempt_at__isnull=False)
        .update(status=Delivery.Status.PENDING, next_attempt_at=now or timezone.now())
    )
    return bool(queued)
