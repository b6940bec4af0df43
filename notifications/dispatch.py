"""Sending what is due: the Celery beat task ``notifications.dispatch`` calls :func:`dispatch_due`.

A delivery is due once its event's transaction committed and its ``next_attempt_at`` passed. A run claims due
deliveries fairly (:mod:`notifications.claims`: lanes round robin across subscriptions, then each lane's oldest),
each by a conditional ``UPDATE`` that moves ``next_attempt_at`` past the run's longest duration, so two dispatchers
(beat's runs overlapping on a worker pool) never send one delivery twice, on any database (found by a real worker
on SQLite, where ``SELECT ... FOR UPDATE`` locks nothing). :mod:`notifications.lanes` sends them, one lane per
endpoint or contact, lanes side by side on threads shared fairly between subscriptions, each webhook signed as it
leaves. While its lanes are busy, a run looks again for what became due every :data:`REFILL_EVERY` seconds (one
recorded just after the run began does not wait for it to end), until nothing is left or no delivery may start
any more (``RUN_FOR``). This thread alone uses the database: it claims, and records each outcome as it comes.

An answer 2xx (or an e-mail handed to Django's backend) succeeds a delivery; anything else is retried after
``BACKOFF`` seconds, twice that the next time, up to ``MAX_BACKOFF``, until ``RETRY_FOR`` seconds after the
event, and then given up. A URL the settings refuse is given up at once. A delivery its lane did not reach (the
endpoint failed earlier in the run, or the run's time was up) is due again at once, at its own place in line
(the ``next_attempt_at`` it was claimed with), no attempt counted. An endpoint that failed ``DISABLE_AFTER``
attempts in a row is disabled, and its subscription's contacts get an ``endpoint.disabled`` event. Only an
endpoint's own attempts count toward disabling it. A contact whose address is not confirmed is never mailed.

A test event its owner asked for (:func:`is_test`, queued by :func:`notifications.manage.send_test`) is sent
once: never retried, never counted toward disabling its endpoint (nor resetting its failures), and sent even to
a disabled endpoint, whose owner may test it before enabling it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from .claims import claim, fair_lanes, group_of, lane_of
from .conf import notification_settings
from .events import ENDPOINT_DISABLED, WEBHOOK_TEST
from .lanes import RUN_FOR, Job, Lanes, Outcome
from .models import Delivery, Endpoint
from .record import record_event
from .secrets import decrypt

logger = logging.getLogger(__name__)
#: Deliveries a run holds at once (claimed, not yet recorded), at most.
BATCH = 100
#: Seconds between two looks for newly due deliveries while a run's lanes are busy.
REFILL_EVERY = 1.0


@dataclass(slots=True)
class DispatchReport:
    """What one dispatch did."""

    sent: int = 0
    failed: int = 0
    given_up: int = 0
    disabled: int = 0
    deferred: int = 0  # not reached in this run: due again at once


def dispatch_due(now: datetime | None = None, *, clock: Callable[[], float] = time.time) -> DispatchReport:
    """Send what is due from ``now`` (default: now) on: what is due then, and what becomes due while the run's
    lanes are busy, until nothing is left or ``RUN_FOR`` seconds passed; ``clock`` is the Unix time each webhook
    is signed with when it is sent (a seam for tests)."""
    now = now or timezone.now()
    # Longer than a run can take (no attempt starts after RUN_FOR, each ends by its deadline): a dispatcher
    # killed mid-run leaves its deliveries due again after it, and no other dispatcher takes one meanwhile.
    run = _Run(time.monotonic(), now + timedelta(seconds=RUN_FOR + float(notification_settings.TIMEOUT) + 30))
    # No transaction around the sending: the claims already keep others off, and a database connection should
    # not sit in a transaction while receivers take their time.
    with Lanes(clock) as lanes:
        looked = 0.0  # seconds into the run of the last look for due deliveries
        look_again = run.take(lanes, now)  # the first look, even when no delivery may start any more
        while look_again or not lanes.idle:
            since = time.monotonic() - run.started
            if not lanes.open:
                run.record(lanes.stop())
                look_again = False
            elif lanes.idle or since - looked >= REFILL_EVERY:
                looked = since
                look_again = run.take(lanes, now + timedelta(seconds=since))
                if lanes.idle:
                    continue  # nothing due (the run is over), or all it took was given up (look again)
            wait = max(0.0, min(run.started + looked + REFILL_EVERY, lanes.stop_at) - time.monotonic())
            outcomes = lanes.collect(wait if lanes.open else None)
            run.record(outcomes)
            # A lane done frees what the last look passed over (its lane, its subscription's share): look again
            # before the run ends.
            look_again = look_again or bool(outcomes)
    return run.report


@dataclass(slots=True)
class _Run:
    """One run's state: its start (monotonic), its lease, what it claimed (each with when), what it did."""

    started: float
    lease: datetime
    report: DispatchReport = field(default_factory=DispatchReport)
    claimed: dict[int, tuple[Delivery, datetime]] = field(default_factory=dict)

    def take(self, lanes: Lanes, at: datetime) -> bool:
        """Claim what is due at ``at`` for lanes that may take more, and queue it; whether anything was."""
        picked = fair_lanes(at, lanes.queue.lanes(), lanes.queue.groups())
        deliveries = claim(at, self.lease, picked, BATCH - lanes.holding)
        jobs = []
        for delivery in deliveries:
            if delivery.endpoint is not None and not delivery.endpoint.is_active and not is_test(delivery):
                _give_up(delivery, Delivery.Failure.ENDPOINT_DISABLED, "the endpoint is disabled", self.report)
            elif delivery.contact is not None and delivery.contact.confirmed_at is None:
                # Its address was changed since the event (and is not confirmed yet): never mail an unconfirmed one.
                _give_up(delivery, Delivery.Failure.CONTACT_UNCONFIRMED, "the address is not confirmed", self.report)
            else:
                self.claimed[delivery.pk] = (delivery, at)
                jobs.append(job_for(delivery))
        self.record(lanes.add(jobs))
        return bool(deliveries)

    def record(self, outcomes: Iterable[Outcome]) -> None:
        for outcome in outcomes:
            delivery, at = self.claimed.pop(outcome.job.delivery_id)
            _record(delivery, outcome, at, self.lease, self.report)


def is_test(delivery: Delivery) -> bool:
    """Whether ``delivery`` is a test its endpoint's owner asked for (its ``event`` loaded): one attempt, never
    retried, not counted toward disabling the endpoint, sent even while the endpoint is disabled."""
    return delivery.event.type == WEBHOOK_TEST


def job_for(delivery: Delivery) -> Job:
    """What the lanes need to send ``delivery`` (its ``event``, ``endpoint`` and ``contact`` loaded), read here:
    the threads use no database."""
    event_id, event_type = str(delivery.event_id), delivery.event.type
    lane, group = lane_of(delivery.endpoint_id, delivery.contact_id), group_of(delivery.event.subscription_id)
    endpoint = delivery.endpoint
    if endpoint is not None:
        previous, until, expires = "", 0.0, endpoint.previous_secret_expires_at
        if endpoint.previous_secret_encrypted and expires is not None:
            previous, until = decrypt(endpoint.previous_secret_encrypted), expires.timestamp()
        return Job(delivery.pk, lane, delivery.body, event_id, event_type, url=endpoint.url,
                   secret=decrypt(endpoint.secret_encrypted), previous_secret=previous, previous_until=until,
                   group=group)  # fmt: skip
    assert delivery.contact is not None
    return Job(delivery.pk, lane, delivery.body, event_id, event_type, email=delivery.contact.email,
               group=group)  # fmt: skip


def _record(delivery: Delivery, outcome: Outcome, now: datetime, lease: datetime, report: DispatchReport) -> None:
    endpoint = delivery.endpoint
    if not outcome.attempted:
        # Due again at once, at its own place in line (the time it was due at when claimed, which the row no
        # longer holds), unless another dispatcher took it meanwhile (then the lease is no longer ours).
        Delivery.objects.filter(pk=delivery.pk, next_attempt_at=lease).update(next_attempt_at=delivery.next_attempt_at)
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
