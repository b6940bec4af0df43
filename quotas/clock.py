"""Where the engine reads the time: one :class:`Clock`, held by the runtime, read by every part.

Every part that judges by time (allowances, the memory of refused clients, the local fallback, settlement, the usage
kept in process, keys' and access-list entries' expiry, the history's and the refusal log's dates, the rules cache's
retries, the refill of the process's shaping budget, a shaped request's hold) reads ``runtime.clock``, as DRF's
throttle reads its ``timer`` and Envoy's ratelimit its injected ``TimeSource``: a test moves one clock and the whole
engine sees the same moment, the production path (allowances, the refusal memory) included.

In production the clock is :data:`SYSTEM_CLOCK`, and the decision itself keeps Redis's own clock: the decision
script reads ``TIME`` on the server, so every process and every host decide on one clock. An *injected* clock
(``clock.injected``, e.g. :class:`ManualClock`) is also the decisions': the store sends its ``now()`` to the
script, and the memory store's keyspace (its key expiry and ``TIME``) follows it.

The circuit breaker's probe interval reads it too: whether a decision tries Redis while the breaker is open is a
decision's path, which a test should be able to replay. What paces real waiting keeps the real monotonic clock:
socket and connection timeouts, an outbound request's deadline, and the poller's own pace (its tick, its
backed-off retries of a database or a Redis that failed, the rules cache's reload backoff, the change mark's
reads). Those wait on a server or a thread, and no test clock makes either answer sooner.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What the engine reads the time from. ``now()``: seconds since the epoch (wall time, for dates, periods and
    expiries); ``monotonic()``: seconds that never go back (for lifetimes and rates); ``sleep(seconds)``: hold the
    calling thread that long as this clock counts it (a shaped request waiting its turn: a test clock moves
    instead). ``injected``: False for the system's clock alone, whose decisions keep the Redis server's
    ``TIME``."""

    injected: bool

    def now(self) -> float: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The machine's clocks: :func:`time.time` and :func:`time.monotonic` themselves, so that a part that binds
    ``clock.now`` once calls the C function directly (no frame of ours on the hot path)."""

    injected = False
    now = staticmethod(time.time)
    monotonic = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)

    def __repr__(self) -> str:
        return "SystemClock()"


#: The production clock: one per process is enough (it holds nothing).
SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that stands still until a test moves it: :meth:`advance` and :meth:`set` move its wall time and its
    monotonic time together, so an allowance's lifetime, a remembered refusal's retry time and a window's edge
    all pass at the same moment.

    It starts at ``start`` (seconds since the epoch; default: the real time when it is first read or moved, so
    that what a test dated by the real clock before its first request, a key's expiry say, agrees with it;
    :meth:`set` it to a window's edge where a test needs one). Its monotonic time starts there too. Thread-safe:
    a test's threads and the poller read it while the test moves it.
    """

    injected = True

    def __init__(self, start: float | None = None) -> None:
        self._now = math.nan if start is None else float(start)  # nan: not read yet
        self._monotonic = self._now
        self._lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the epoch, as the clock stands."""
        now = self._now
        return self._start() if math.isnan(now) else now  # nan: the first reading

    def monotonic(self) -> float:
        """Seconds that never go back: moved by the same steps as :meth:`now`."""
        now = self._monotonic
        return self._start() if math.isnan(now) else now

    def _start(self) -> float:
        with self._lock:
            if math.isnan(self._now):
                self._now = self._monotonic = time.time()
            return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move time ``seconds`` forward (``ValueError`` for a negative or not finite step)."""
        self._start()
        with self._lock:
            self._move(seconds)

    def sleep(self, seconds: float) -> None:
        """What a thread's wait of ``seconds`` is on this clock: time moves that far, at once, for every reader."""
        self.advance(seconds)

    def set(self, at: float) -> None:
        """Move time forward to ``at`` (seconds since the epoch); ``ValueError`` for a moment already past (the
        monotonic time never goes back: start a new clock instead)."""
        self._start()
        with self._lock:
            self._move(float(at) - self._now)

    def _move(self, seconds: float) -> None:
        if not seconds >= 0 or math.isinf(seconds):
            raise ValueError(f"a clock moves forward by a finite step, not {seconds!r}")
        self._now += seconds
        self._monotonic += seconds

    def __repr__(self) -> str:
        return f"ManualClock({self._now!r})"
