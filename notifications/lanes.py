"""Sending one dispatch run's deliveries: a lane per endpoint or contact, lanes side by side, no database.

A lane sends its deliveries one after the other, so an endpoint never has two requests of one run in flight;
up to :data:`CONCURRENCY` lanes run at once, in threads, so a slow or unreachable endpoint holds up only its
own lane. A lane stops at its first failure (the endpoint is unwell: the rest of its deliveries wait for the
next run, unattempted), and no lane starts a delivery once the run has lasted :data:`RUN_FOR` seconds, so a
run ends within ``RUN_FOR + TIMEOUT`` seconds however many deliveries are due. Each webhook is signed just
before it is sent, with the time then (never the run's start). The threads touch no database: the dispatcher
(:mod:`notifications.dispatch`) prepares :class:`Job` values and records the :class:`Outcome` values.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from django.conf import settings
from django.core.mail import send_mail

from . import sender
from .conf import notification_settings
from .models import Delivery
from .signing import HEADER, signature

#: Lanes (endpoints or contacts) sent to at the same time, at most.
CONCURRENCY = 8
#: Seconds after a run's start past which no lane starts another delivery (the rest wait for the next run).
RUN_FOR = 30.0
#: A receiver's answers that deliver; anything else (a redirect included) is retried.
SUCCESS = range(200, 300)

Failure = Delivery.Failure


@dataclass(frozen=True, slots=True)
class Job:
    """One delivery to send, as plain values: a webhook (``url``, ``secret``, and a rolled secret that still
    signs beside it until the Unix time ``previous_until``) or an e-mail (``email``)."""

    delivery_id: int
    lane: str
    body: str
    event_id: str
    event_type: str
    url: str = ""
    secret: str = ""
    email: str = ""
    previous_secret: str = ""
    previous_until: float = 0.0

    def older_secrets(self, timestamp: float) -> tuple[str, ...]:
        """The secrets a webhook sent at ``timestamp`` is also signed with: the rolled one while its overlap
        lasts (judged by the send's own clock, so a test moves it without sleeping)."""
        return (self.previous_secret,) if self.previous_secret and timestamp < self.previous_until else ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of a job: not attempted (``attempted`` False), or its answer and failure, if any."""

    job: Job
    attempted: bool
    ok: bool = False
    status: int | None = None
    answer: str = ""
    failure: str = ""
    error: str = ""
    refused: bool = False


def send_all(jobs: Iterable[Job], clock: Callable[[], float] = time.time) -> Iterator[Outcome]:
    """Send ``jobs`` lane by lane (lanes in parallel); yields each lane's outcomes as that lane finishes.

    ``clock`` gives the Unix time each webhook is signed with (a seam for tests)."""
    lanes: dict[str, list[Job]] = {}
    for job in jobs:
        lanes.setdefault(job.lane, []).append(job)
    if not lanes:
        return
    stop_at = time.monotonic() + RUN_FOR
    with ThreadPoolExecutor(max_workers=min(CONCURRENCY, len(lanes)), thread_name_prefix="notify") as pool:
        futures = [pool.submit(_lane, lane, stop_at, clock) for lane in lanes.values()]
        for future in as_completed(futures):
            yield from future.result()


def _lane(jobs: list[Job], stop_at: float, clock: Callable[[], float]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    stopped = False
    for job in jobs:
        if stopped or time.monotonic() >= stop_at:
            outcomes.append(Outcome(job, attempted=False))
            continue
        outcome = send_one(job, clock)
        outcomes.append(outcome)
        stopped = not outcome.ok
    return outcomes


def send_one(job: Job, clock: Callable[[], float] = time.time) -> Outcome:
    """Send ``job`` now, signed at ``clock()``; what became of it (never raises for the exchange's failures)."""
    try:
        if job.url:
            timestamp = int(clock())  # signed now, as it leaves
            headers = {
                HEADER: signature(job.secret, timestamp, job.body, *job.older_secrets(timestamp)),
                "Quota-Event-Id": job.event_id,
                "Quota-Event-Type": job.event_type,
            }
            answer = sender.post(job.url, job.body, headers)
            ok = answer.status in SUCCESS
            return Outcome(job, True, ok, answer.status, answer.body, "" if ok else Failure.HTTP_STATUS,
                           "" if ok else f"HTTP {answer.status}")  # fmt: skip
        _mail(job)
        return Outcome(job, True, ok=True)
    except sender.Refused as exc:
        failure = Failure.REFUSED_ADDRESS if exc.kind == "address" else Failure.REFUSED_URL
        return Outcome(job, True, failure=failure, error=f"refused: {exc}", refused=True)
    except Exception as exc:  # a network, TLS or mail failure: retried
        return Outcome(job, True, failure=failure_of(exc, mail=not job.url), error=f"{type(exc).__name__}: {exc}")


def failure_of(exc: BaseException, *, mail: bool = False) -> str:
    """The kind of failure ``exc`` is, as a customer is shown it."""
    if mail:
        return Failure.MAIL_FAILED
    if isinstance(exc, TimeoutError):  # the request's deadline, or connecting took too long
        return Failure.TIMEOUT
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return Failure.TLS
    return Failure.CONNECTION_FAILED  # refused, reset, unreachable, a malformed answer (OSError, HTTPException)


def _mail(job: Job) -> None:
    subject, _, text = job.body.partition("\n\n")
    sender_address = notification_settings.FROM_EMAIL or settings.DEFAULT_FROM_EMAIL
    send_mail(subject, text, sender_address, [job.email], fail_silently=False)
