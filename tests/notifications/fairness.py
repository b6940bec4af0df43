"""How long one subscription's webhook waits behind another's slow endpoints: the scene and its driver.

Shared by the slow test (tests/notifications/test_fairness.py, 10 endpoints, TIMEOUT 1 s) and the figures at the
security review's scale (tests/notifications/fairness_figures.py, run by hand). The driver runs
:func:`notifications.dispatch.dispatch_due` as beat and the Procfile's ``notifier`` (concurrency 1) do: beat sends
the task every ``interval`` seconds and each message expires after ``interval`` (config/settings.py), so a run
starts at beat's tick, or at once when the run before outlasted a tick; runs never overlap. One thread: the
dispatcher's own (its lanes' threads touch no database).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from notifications.dispatch import dispatch_due
from notifications.models import Endpoint
from notifications.record import record_event
from notifications.secrets import encrypt, new_secret
from plans.models import Subscription


@dataclass
class Runs:
    """The dispatcher's runs so far: (start, end) in seconds since the first."""

    spans: list[tuple[float, float]] = field(default_factory=list)


def endpoints(subscription: Subscription, url: str, count: int) -> list[Endpoint]:
    """``count`` endpoints of ``subscription`` at ``url`` (each its own lane), wanting every event."""
    made = []
    for n in range(count):
        secret = encrypt(new_secret())
        made.append(Endpoint.objects.create(subscription=subscription, url=f"{url}?n={n}", secret_encrypted=secret))
    return made


def backlog(subscription: Subscription, events: int, at: datetime) -> None:
    """``events`` events of ``subscription`` recorded at ``at``: one delivery each to each of its endpoints."""
    for n in range(events):
        record_event("api_key.expiring", subscription, f"backlog-{subscription.pk}-{n}", {"n": n}, at)


def one_event(subscription: Subscription, at: datetime) -> None:
    """One ``client.banned`` event of ``subscription``, due at ``at``.

    Recorded ahead, due later: to a dispatcher a delivery is there once it is due, so this is the event recorded
    at ``at`` (while a run goes on), without a second thread writing to the test's database meanwhile."""
    record_event("client.banned", subscription, f"banned-{subscription.pk}", {"client": "c"}, at)


def notifier(done: Callable[[], bool], interval: float, give_up_after: float) -> Runs:
    """Run the dispatcher as beat and a concurrency-1 notifier would until ``done()`` (asked between runs and
    while waiting for a tick) or ``give_up_after`` seconds."""
    runs = Runs()
    first = time.monotonic()
    start = first
    while not done() and time.monotonic() - first < give_up_after:
        while time.monotonic() < start:
            if done():
                return runs
            time.sleep(0.05)  # beat's next tick: real time, as the receivers' slowness is
        began = time.monotonic()
        dispatch_due()
        ended = time.monotonic()
        runs.spans.append((began - first, ended - first))
        # Beat's next tick after this run began: a tick during the run left a message that has not expired yet.
        tick = first + interval * (math.floor((began - first) / interval) + 1)
        start = max(ended, tick)
    return runs


def due_in(seconds: float) -> datetime:
    """The time ``seconds`` from now."""
    return timezone.now() + timedelta(seconds=seconds)
