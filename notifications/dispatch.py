"""Sending what is due: the Celery beat task ``notifications.dispatch`` calls :func:`dispatch_due`.

A delivery is due once its event's transaction committed and its ``next_attempt_at`` passed. Each is claimed
by a conditional ``UPDATE`` that moves ``next_attempt_at`` past the attempt's longest duration, so two
dispatchers (beat's runs overlapping on a worker pool) never send one delivery twice, on any database (found by
a real worker on SQLite, where ``SELECT ... FOR UPDATE`` locks nothing). An answer 2xx (or an e-mail handed to
Django's backend) succeeds it; anything else is retried after ``BACKOFF`` seconds, twice that the next time, up
to ``MAX_BACKOFF``, until ``RETRY_FOR`` seconds after the event, and then given up. A URL the settings refuse is
given up at once. An endpoint that failed ``DISABLE_AFTER`` attempts in a row is disabled, and its
subscription's contacts get an ``endpoint.disabled`` event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from . import sender
from .conf import notification_settings
from .events import ENDPOINT_DISABLED
from .models import Delivery, Endpoint
from .record import record_event
from .secrets import decrypt
from .signing import HEADER, signature

logger = logging.getLogger(__name__)
#: Deliveries sent per dispatch, at most: the next run takes the rest.
BATCH = 100
#: A receiver's answers that deliver; anything else (a redirect included) is retried.
SUCCESS = range(200, 300)


@dataclass(slots=True)
class DispatchReport:
    """What one dispatch did."""

    sent: int = 0
    failed: int = 0
    given_up: int = 0
    disabled: int = 0


def dispatch_due(now: datetime | None = None) -> DispatchReport:
    """Send every delivery due at ``now`` (default: now), at most :data:`BATCH`."""
    now = now or timezone.now()
    report = DispatchReport()
    due = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=now).order_by("next_attempt_at")
    # Longer than an attempt can take: a dispatcher killed mid-attempt leaves the delivery due again after it.
    lease = now + timedelta(seconds=2 * float(notification_settings.TIMEOUT) + 30)
    for delivery_id in list(due.values_list("pk", flat=True)[:BATCH]):
        # Claim it: one conditional UPDATE, which only one dispatcher wins on any database (SQLite included,
        # where SELECT ... FOR UPDATE is a no-op).
        claimed = Delivery.objects.filter(
            pk=delivery_id, status=Delivery.Status.PENDING, next_attempt_at__lte=now
        ).update(next_attempt_at=lease)
        if claimed:
            # No transaction around the attempt: the claim already keeps others off, and a database connection
            # should not sit in a transaction while a receiver takes its time.
            delivery = Delivery.objects.select_related("event", "endpoint", "contact").get(pk=delivery_id)
            _attempt(delivery, now, report)
    return report


def _attempt(delivery: Delivery, now: datetime, report: DispatchReport) -> None:
    endpoint = delivery.endpoint
    if endpoint is not None and not endpoint.is_active:
        _give_up(delivery, "the endpoint is disabled", report)
        return
    delivery.attempts += 1
    delivery.last_attempt_at = now
    try:
        if endpoint is not None:
            answer = _post(delivery, endpoint, now)
            delivery.response_status, delivery.response_body = answer.status, answer.body
            ok = answer.status in SUCCESS
            delivery.error = "" if ok else f"HTTP {answer.status}"
        else:
            _mail(delivery)
            ok, delivery.error = True, ""
    except sender.Refused as exc:
        _give_up(delivery, f"refused: {exc}", report)
        _count_failure(endpoint, now, report)
        return
    except Exception as exc:  # a network, TLS or mail failure: retried
        ok, delivery.error = False, f"{type(exc).__name__}: {exc}"[:300]
    if ok:
        delivery.status = Delivery.Status.SUCCEEDED
        report.sent += 1
        if endpoint is not None and endpoint.consecutive_failures:
            Endpoint.objects.filter(pk=endpoint.pk).update(consecutive_failures=0)
    else:
        report.failed += 1
        wait = min(float(notification_settings.BACKOFF) * 2 ** (delivery.attempts - 1),
                   float(notification_settings.MAX_BACKOFF))  # fmt: skip
        next_at = now + timedelta(seconds=wait)
        if next_at > delivery.event.created_at + timedelta(seconds=float(notification_settings.RETRY_FOR)):
            delivery.status = Delivery.Status.FAILED
            report.given_up += 1
        delivery.next_attempt_at = next_at
        _count_failure(endpoint, now, report)
    delivery.save()


def _post(delivery: Delivery, endpoint: Endpoint, now: datetime) -> sender.Answer:
    timestamp = int(now.timestamp())
    headers = {
        HEADER: signature(decrypt(endpoint.secret_encrypted), timestamp, delivery.body),
        "Quota-Event-Id": str(delivery.event_id),
        "Quota-Event-Type": delivery.event.type,
    }
    return sender.post(endpoint.url, delivery.body, headers)


def _mail(delivery: Delivery) -> None:
    subject, _, text = delivery.body.partition("\n\n")
    sender_address = notification_settings.FROM_EMAIL or settings.DEFAULT_FROM_EMAIL
    assert delivery.contact is not None
    send_mail(subject, text, sender_address, [delivery.contact.email], fail_silently=False)


def _give_up(delivery: Delivery, why: str, report: DispatchReport) -> None:
    delivery.status = Delivery.Status.FAILED
    delivery.error = why[:300]
    report.given_up += 1
    delivery.save()


def _count_failure(endpoint: Endpoint | None, now: datetime, report: DispatchReport) -> None:
    """One more failure in a row for ``endpoint``; past ``DISABLE_AFTER`` it is disabled and its owner told."""
    if endpoint is None:
        return
    endpoint.consecutive_failures += 1
    Endpoint.objects.filter(pk=endpoint.pk).update(consecutive_failures=endpoint.consecutive_failures)
    if endpoint.is_active and endpoint.consecutive_failures >= int(notification_settings.DISABLE_AFTER):
        endpoint.is_active = False
        endpoint.disabled_reason = f"disabled after {endpoint.consecutive_failures} failed attempts in a row"
        Endpoint.objects.filter(pk=endpoint.pk).update(is_active=False, disabled_reason=endpoint.disabled_reason)
        report.disabled += 1
        logger.warning("notifications: endpoint %s disabled (%s)", endpoint.pk, endpoint.disabled_reason)
        data = {"endpoint": endpoint.pk, "url": endpoint.url, "failures": endpoint.consecutive_failures}
        key = f"{ENDPOINT_DISABLED}:{endpoint.pk}:{now.isoformat()}"
        record_event(ENDPOINT_DISABLED, endpoint.subscription, key, data, now)
