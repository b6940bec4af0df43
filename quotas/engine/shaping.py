"""How much shaping delay one process may hold: a leaky bucket's sleeps must not take every worker.

A shaping leaky bucket admits a request and asks it to wait its turn
(``max_delay``); the throttle sleeps inside the request. Unbounded, one client
sending at its allowed rate could keep every worker of a process asleep. So
each process has a budget of sleep, a token bucket in seconds:
``SHAPING_DELAY_BUDGET`` seconds may be slept at once (the burst), refilled at
``SHAPING_DELAY_SHARE`` seconds per second (the share of a worker's time that
may go to sleeping). A delay that does not fit is refused with 429 and the
decision is taken back.
"""

from __future__ import annotations

import math
import threading
import time

from quotas.conf import quota_settings


class ShapingBudget:
    """The seconds of shaping sleep this process may still start (thread-safe).

    Starts full; the settings are read at each :meth:`take` (never at import).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: float | None = None  # None: full (the capacity is read when first needed)
        self._at = 0.0

    def take(self, delay: float, now: float | None = None) -> float:
        """Spend ``delay`` seconds of sleep; returns 0 when granted, else seconds until it would fit."""
        capacity = float(quota_settings.SHAPING_DELAY_BUDGET)
        share = float(quota_settings.SHAPING_DELAY_SHARE)
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._tokens is None:
                self._tokens = capacity
            else:
                self._tokens = min(capacity, self._tokens + max(0.0, now - self._at) * share)
            self._at = now
            if delay <= self._tokens:
                self._tokens -= delay
                return 0.0
            if delay > capacity or share <= 0:
                return math.inf
            return (delay - self._tokens) / share

    def reset(self) -> None:
        """Full again (the engine was rebuilt, e.g. after a settings change)."""
        with self._lock:
            self._tokens = None


def retry_after(delay: float, wait: float) -> int:
    """Retry-After for a shaped request refused for lack of budget: the sooner of two moments.

    After ``wait`` seconds the budget has room for the delay; after ``delay``
    seconds the client's bucket has drained that far (the refused request was
    given back), so the retry needs no delay at all.
    """
    return max(1, math.ceil(min(wait, delay)))


#: This process's budget (one per process: forked workers each start with a full one).
budget = ShapingBudget()
