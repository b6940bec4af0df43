"""Sending what is due: the Celery beat task ``notifications.dispatch`` calls :func:`dispatch_due`.

A delivery is due once its event's transaction committed and its ``next_attempt_at`` passed. Each is claimed
by a conditional ``UPDATE`` that moves ``next_attempt_at`` past the run's longest duration, so two dispatchers
(beat's runs overlapping on a worker pool) never send one delivery twice, on any database (found by a real
worker on SQLite, where ``SELECT ... FOR UPDATE`` locks nothing). :mod:`notifications.lanes` sends them, one
lane per endpoint or contact, lanes side by side, each webhook signed as it leaves. An answer 2xx (or an e-mail
handed to Django's backend) succeeds it; anything else is retried after ``BACKOFF`` seconds, twice that the
next time, up to ``MAX_BACKOFF``, until ``RETRY_FOR`` seconds after the event, and then given up. A URL the
settings refuse is given up at once. A delivery its lane did not reach (the endpoint failed earlier in the run,
or the run's time was up) is due again at once, no attempt counted. An endpoint that failed ``DISABLE_AFTER``
attempts in a row is disabled, and its subscription's contacts get an ``endpoint.disabled`` event. Only an
endpoint's own attempts count toward disabling it. A contact whose address is not confirmed is never mailed.

A test event its owner asked for (:func:`is_test`, queued by :func:`notifications.manage.send_test`) is sent
once: never retried, never counted toward disabling its endpoint (nor resetting its failures), and sent even to
a disabled endpoint, whose owner may test it before enabling it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from .conf import notification_settings
from .events import ENDPOINT_DISABLED, WEBHOOK_TEST
from .lanes import RUN_FOR, Job, Outcome, send_all
from .models import Delivery, Endpoint
from .record import record_event
from .secrets import decrypt

logger = logging.getLogger(__name__)
#: Deliveries sent per dispatch, at most: the next run takes the rest.
BATCH = 100


@dataclass(slots=True)
class DispatchReport:
    """What one dispatch did."""

    sent: int = 0
    failed: int = 0
    given_up: int = 0
    disabled: int = 0
    deferred: int = 0  # not reached in this run: due again at once


def dispatch_due(now: datetime | None = None, *, clock: Callable[[], float] = time.time) -> DispatchReport:
    """Send every delivery due at ``now`` (default: now), at most :data:`BATCH`; ``clock`` is the Unix time
    each webhook is signed with when it is sent (a seam for tests)."""
    now = now or timezone.now()
    report = DispatchReport()
    due = Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=now).order_by("next_attempt_at")
    # Longer than a run can take (no attempt starts after RUN_FOR, each ends by its deadline): a dispatcher
    # killed mid-run leaves its deliveries due again after it, and no other dispatcher takes one meanwhile.
    lease = now + timedelta(seconds=RUN_FOR + float(notification_settings.TIMEOUT) + 30)
    claimed: dict[int, Delivery] = {}
    for delivery_id in list(due.values_list("pk", flat=True)[:BATCH]):
        # Claim it: one conditional UPDATE, which only one dispatcher wins on any database (SQLite included,
        # where SELECT ... FOR UPDATE is a no-op).
        if Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING, next_attempt_at__lte=now).update(
            next_attempt_at=lease
        ):
            claimed[delivery_id] = Delivery.objects.select_related("event", "endpoint", "contact").get(pk=delivery_id)
    jobs = []
    for delivery in claimed.values():
        if delivery.endpoint is not None and not delivery.endpoint.is_active and not is_test(delivery):
            _give_up(delivery, Delivery.Failure.ENDPOINT_DISABLED, "the endpoint is disabled", report)
        elif delivery.contact is not None and delivery.contact.confirmed_at is None:
            # Its address was changed since the event (and is not confirmed yet): never mail an unconfirmed one.
            _give_up(delivery, Delivery.Failure.CONTACT_UNCONFIRMED, "the address is not confirmed", report)
        else:
            jobs.append(job_for(delivery))
    # No transaction around the sending: the claims already keep others off, and a database connection should
    # not sit in a transaction while receivers take their time. Only this thread uses the database.
    for outcome in send_all(jobs, clock):
        _record(claimed[outcome.job.delivery_id], outcome, now, lease, report)
    return report


def is_test(delivery: Delivery) -> bool:
    """Whether ``delivery`` is a test its endpoint's owner asked for (its ``event`` loaded): one attempt, never
    retried, not counted toward disabling the endpoint, sent even while the endpoint is disabled."""
    return delivery.event.type == WEBHOOK_TEST


def job_for(delivery: Delivery) -> Job:
    """What the lanes need to send ``delivery`` (its ``event``, ``endpoint`` and ``contact`` loaded), read here:
    the threads use no database."""
    event_id, event_type = str(delivery.event_id), delivery.event.type
    endpoint = delivery.endpoint
    if endpoint is not None:
        previous, until, expires = "", 0.0, endpoint.previous_secret_expires_at
        if endpoint.previous_secret_encrypted and expires is not None:
            previous, until = decrypt(endpoint.previous_secret_encrypted), expires.timestamp()
        return Job(delivery.pk, f"endpoint:{delivery.endpoint_id}", delivery.body, event_id, event_type,
                   url=endpoint.url, secret=decrypt(endpoint.secret_encrypted),
                   previous_secret=previous, previous_until=until)  # fmt: skip
    assert delivery.contact is not None
    return Job(delivery.pk, f"contact:{delivery.contact_id}", delivery.body, event_id, event_type,
               email=delivery.contact.email)  # fmt: skip


def _record(delivery: Delivery, outcome: Outcome, now: datetime, lease: datetime, report: DispatchReport) -> None:
    endpoint = delivery.endpoint
    if not outcome.attempted:
        # Due again at once, unless another dispatcher took it meanwhile (then the lease is no longer ours).
        Delivery.objects.filter(pk=delivery.pk, next_attempt_at=lease).update(next_attempt_at=now)
        report.deferred += 1
        return
    delivery.attempts += 1
    delivery.last_attempt_at = now
    delivery.error, delivery.failure = outcome.error[:300], outcome.failure
    if outcome.status is not None:
        delivery.response_status, delivery.response_body = outcome.status, outcome.answer
    counts = not is_test(delivery)  # toward disabling the endpoint (a failure) or its fresh start (a success)
    if outcome.refused or (not outcome.ok and not counts):
        _give_up(delivery, outcome.failure, outcome.error, report)  # a test: one attempt, never retried
        if counts:
            _count_failure(endpoint, now, report)
        return
    if outcome.ok:
        delivery.status = Delivery.Status.SUCCEEDED
        delivery.next_attempt_at = None  # delivered: there is no next attempt
        report.sent += 1
        if counts and endpoint is not None and endpoint.consecutive_failures:
            Endpoint.objects.filter(pk=endpoint.pk).update(consecutive_failures=0)
    else:
        report.failed += 1
        wait = min(float(notification_settings.BACKOFF) * 2 ** (delivery.attempts - 1),
                   float(notification_settings.MAX_BACKOFF))  # fmt: skip
        next_at = now + timedelta(seconds=wait)
        if next_at > delivery.event.created_at + timedelta(seconds=float(notification_settings.RETRY_FOR)):
            delivery.status = Delivery.Status.FAILED  # given up: no next attempt
            report.given_up += 1
        delivery.next_attempt_at = next_at if delivery.status == Delivery.Status.PENDING else None
        _count_failure(endpoint, now, report)
    delivery.save()


def _give_up(delivery: Delivery, failure: str, why: str, report: DispatchReport) -> None:
    delivery.status = Delivery.Status.FAILED
    delivery.next_attempt_at = None
    delivery.failure, delivery.error = failure, why[:300]
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
