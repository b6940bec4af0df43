"""Sending one dispatch run's deliveries: a lane per endpoint or contact, threads shared fairly, no database.

A lane sends its deliveries one after the other, so an endpoint never has two requests in flight; up to
:data:`CONCURRENCY` lanes send at once, in threads, so a slow or unreachable endpoint holds up only its own lane.
Lanes belong to groups (a subscription's, see :func:`notifications.dispatch.job_for`), and the threads are
shared between groups: the next free thread goes to the waiting group that has the fewest lanes sending (the one
served least recently among equals), within a group to its lane served least recently, and no group has more
than :data:`SHARE` lanes sending at once. So one subscription's many slow endpoints leave threads free for the
others, and a delivery of a group that has none sending waits at most for one thread to come free: one request's
deadline, ``TIMEOUT``.

A lane stops at its first failure (the endpoint is unwell: the rest of its deliveries wait for the next run,
unattempted), and no delivery starts once the run has lasted :data:`RUN_FOR` seconds, so a run ends within
``RUN_FOR + TIMEOUT`` seconds however many deliveries are due. Each webhook is signed just before it is sent,
with the time then (never the run's start). The threads touch no database: the dispatcher
(:mod:`notifications.dispatch`) prepares :class:`Job` values, adds them while the run lasts, and records the
:class:`Outcome` values in its own thread.
"""

from __future__ import annotations

import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from types import TracebackType

from django.conf import settings
from django.core.mail import send_mail

from . import sender
from .conf import notification_settings
from .models import Delivery
from .signing import HEADER, signature

#: Lanes (endpoints or contacts) sent to at the same time, at most.
CONCURRENCY = 8
#: Lanes of one group (subscription) sent to at the same time, at most: the other threads stay for the others.
SHARE = CONCURRENCY // 2
#: Seconds after a run's start past which no delivery starts (the rest wait for the next run).
RUN_FOR = 30.0
#: A receiver's answers that deliver; anything else (a redirect included) is retried.
SUCCESS = range(200, 300)

Failure = Delivery.Failure


@dataclass(frozen=True, slots=True)
class Job:
    """One delivery to send, as plain values: a webhook (``url``, ``secret``, and a rolled secret that still
    signs beside it until the Unix time ``previous_until``) or an e-mail (``email``), in its ``lane`` (its
    endpoint or contact) of its ``group`` (its subscription)."""

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
    group: str = ""

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


class FairQueue:
    """The jobs waiting for a thread, and the lanes sending: which job goes next (no threads, no clock).

    :meth:`take` gives the next job to start, or None: none of a lane already sending, none of a group that
    has ``share`` lanes sending; of the groups left, the one with the fewest lanes sending, the least recently
    served among equals; within it, its least recently served lane. :meth:`done` frees the job's lane again."""

    def __init__(self, share: int = SHARE) -> None:
        self.share = share
        # Insertion order is the rotation: a group (a lane) served moves to the end.
        self._waiting: dict[str, dict[str, deque[Job]]] = {}
        self._sending: dict[str, int] = {}  # lanes sending, per group
        self._busy: dict[str, str] = {}  # lanes sending, and their groups
        #: Lanes that failed in this run: they take no more jobs (:meth:`add` hands them back).
        self.closed: set[str] = set()

    def __len__(self) -> int:
        """Jobs waiting."""
        return sum(len(jobs) for lanes in self._waiting.values() for jobs in lanes.values())

    def add(self, job: Job) -> bool:
        """Queue ``job`` at the end of its lane; False (not queued) when its lane is closed."""
        if job.lane in self.closed:
            return False
        self._waiting.setdefault(job.group, {}).setdefault(job.lane, deque()).append(job)
        return True

    def take(self) -> Job | None:
        """The next job to start (its lane is then sending), or None when none may start now."""
        best: tuple[int, str, str] | None = None
        for group, lanes in self._waiting.items():
            sending = self._sending.get(group, 0)
            if sending >= self.share or (best is not None and sending >= best[0]):
                continue
            lane = next((name for name in lanes if name not in self._busy), None)
            if lane is not None:
                best = (sending, group, lane)
        if best is None:
            return None
        _, group, lane = best
        lanes = self._waiting.pop(group)
        jobs = lanes.pop(lane)
        job = jobs.popleft()
        if jobs:
            lanes[lane] = jobs  # to the end of its group's lanes
        if lanes:
            self._waiting[group] = lanes  # to the end of the groups
        self._busy[lane] = group
        self._sending[group] = self._sending.get(group, 0) + 1
        return job

    def done(self, outcome: Outcome) -> list[Job]:
        """``outcome``'s lane is free again; after a failure it is closed, and its waiting jobs are returned
        (not to be attempted in this run)."""
        job = outcome.job
        del self._busy[job.lane]
        self._sending[job.group] -= 1
        if outcome.ok:
            return []
        self.closed.add(job.lane)
        lanes = self._waiting.get(job.group, {})
        dropped = list(lanes.pop(job.lane, ()))
        if not lanes:
            self._waiting.pop(job.group, None)
        return dropped

    def drain(self) -> list[Job]:
        """Every waiting job, removed."""
        jobs = [job for lanes in self._waiting.values() for queue in lanes.values() for job in queue]
        self._waiting.clear()
        return jobs

    def lanes(self) -> set[str]:
        """The lanes with a job waiting or sending, and those closed: the ones a run takes no more jobs for."""
        return {lane for lanes in self._waiting.values() for lane in lanes} | set(self._busy) | self.closed

    def groups(self) -> dict[str, int]:
        """How many lanes of each group have a job waiting or sending."""
        held = {(group, lane) for group, lanes in self._waiting.items() for lane in lanes}
        held |= {(group, lane) for lane, group in self._busy.items()}
        counts: dict[str, int] = {}
        for group, _ in held:
            counts[group] = counts.get(group, 0) + 1
        return counts


class Lanes:
    """One run's threads: jobs are added while it lasts (:meth:`add`), outcomes collected (:meth:`collect`).

    Used as a context manager; the exit waits for the requests in flight (each ends by its deadline)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.queue = FairQueue()
        #: The monotonic time after which no delivery starts.
        self.stop_at = time.monotonic() + RUN_FOR
        self._pool = ThreadPoolExecutor(max_workers=CONCURRENCY, thread_name_prefix="notify")
        self._sending: dict[Future[Outcome], Job] = {}

    def __enter__(self) -> Lanes:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._pool.shutdown(wait=True)

    @property
    def open(self) -> bool:
        """Whether deliveries may still start (the run has lasted less than :data:`RUN_FOR`)."""
        return time.monotonic() < self.stop_at

    @property
    def idle(self) -> bool:
        """Nothing waiting, nothing sending."""
        return not self._sending and not len(self.queue)

    @property
    def holding(self) -> int:
        """Jobs waiting or sending."""
        return len(self._sending) + len(self.queue)

    def add(self, jobs: Iterable[Job]) -> list[Outcome]:
        """Queue ``jobs`` and start what may start; the jobs of closed lanes come back, not attempted."""
        refused = [Outcome(job, attempted=False) for job in jobs if not self.queue.add(job)]
        self._start()
        return refused

    def collect(self, timeout: float | None) -> list[Outcome]:
        """The outcomes of the requests that ended within ``timeout`` seconds (None: until one ends), and the
        jobs their lanes' failures left unattempted; then starts what may start."""
        if not self._sending:
            return []
        ended, _ = wait(self._sending, timeout=timeout, return_when=FIRST_COMPLETED)
        outcomes: list[Outcome] = []
        for future in ended:
            del self._sending[future]
            outcome = future.result()
            outcomes.append(outcome)
            outcomes.extend(Outcome(job, attempted=False) for job in self.queue.done(outcome))
        self._start()
        return outcomes

    def stop(self) -> list[Outcome]:
        """Start nothing more: the waiting jobs, not attempted."""
        self.stop_at = time.monotonic()
        return [Outcome(job, attempted=False) for job in self.queue.drain()]

    def _start(self) -> None:
        while len(self._sending) < CONCURRENCY and self.open and (job := self.queue.take()) is not None:
            self._sending[self._pool.submit(send_one, job, self.clock)] = job


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
