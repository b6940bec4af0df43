"""How much shaping delay one process may hold: a leaky bucket's sleeps must not take every worker.

A shaping leaky bucket admits a request and asks it to wait its turn
(``max_delay``); the throttle sleeps inside the request. Unbounded, one client
sending at its allowed rate could keep every worker of a process asleep. So
each process has a budget of sleep, a token bucket in seconds:
``SHAPING_DELAY_BUDGET`` seconds may be slept at once (the burst), refilled at
``SHAPING_DELAY_SHARE`` seconds per second (the share of a worker's time that
may go to sleeping). A delay that does not fit is refused with 429 and the
decision is taken back.

Inside the process's budget each client has a budget of its own,
``SHAPING_CLIENT_SHARE`` of it in size and in refill: a delay must fit both.
Without it one tenant's shaped traffic could spend the whole budget and every
other tenant's shaped requests would be refused; with it, whatever one client
sends, the others always find ``1 - SHAPING_CLIENT_SHARE`` of the budget.
"""

from __future__ import annotations

import math
import threading
import time

from quotas.conf import quota_settings

#: Clients whose own budget one process remembers. Past it, clients whose budget has refilled are
#: forgotten first (they have nothing left to remember), then the least recently seen.
MAX_CLIENTS = 10_000


class ShapingBudget:
    """The seconds of shaping sleep this process may still start, overall and per client (thread-safe).

    Starts full; the settings are read at each :meth:`take` (never at import).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: float | None = None  # None: full (the capacity is read when first needed)
        self._at = 0.0
        self._clients: dict[str, tuple[float, float]] = {}  # client -> (its tokens, when last counted)

    def take(self, delay: float, client: str | None = None, now: float | None = None) -> float:
        """Spend ``delay`` seconds of sleep for ``client``; returns 0 when granted, else seconds until it would fit.

        ``client`` (a client tag) must also have that much left of its own
        share; None spends from the process's budget alone. Nothing is spent
        unless the delay fits both.
        """
        capacity = float(quota_settings.SHAPING_DELAY_BUDGET)
        share = float(quota_settings.SHAPING_DELAY_SHARE)
        fraction = float(quota_settings.SHAPING_CLIENT_SHARE)
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._tokens is None:
                self._tokens = capacity
            else:
                self._tokens = min(capacity, self._tokens + max(0.0, now - self._at) * share)
            self._at = now
            wait = _wait(delay, self._tokens, capacity, share)
            if client is None:
                if not wait:
                    self._tokens -= delay
                return wait
            own = self._own_tokens(client, capacity * fraction, share * fraction, now)
            wait = max(wait, _wait(delay, own, capacity * fraction, share * fraction))
            if not wait:
                self._tokens -= delay
                own -= delay
            self._clients.pop(client, None)  # re-inserted last: the dict's order is least recently seen first
            self._clients[client] = (own, now)
            if len(self._clients) > MAX_CLIENTS:
                self._forget(capacity * fraction, share * fraction, now)
            return wait

    def remembered_clients(self) -> list[str]:
        """The clients whose own budget this process remembers, least recently seen first (at most
        :data:`MAX_CLIENTS`; a client not among them has its whole share)."""
        with self._lock:
            return list(self._clients)

    def reset(self) -> None:
        """Full again (the runtime was rebuilt, e.g. after a settings change)."""
        with self._lock:
            self._tokens = None
            self._clients.clear()

    def _own_tokens(self, client: str, capacity: float, share: float, now: float) -> float:
        # Called with the lock held.
        tokens, at = self._clients.get(client, (capacity, now))
        return min(capacity, tokens + max(0.0, now - at) * share)

    def _forget(self, capacity: float, share: float, now: float) -> None:
        # Called with the lock held. A client whose budget is full again is as good as never seen.
        self._clients = {
            c: (tokens, at) for c, (tokens, at) in self._clients.items() if tokens + (now - at) * share < capacity
        }
        while len(self._clients) > MAX_CLIENTS:
            del self._clients[next(iter(self._clients))]


def _wait(delay: float, tokens: float, capacity: float, share: float) -> float:
    """0 when ``delay`` fits ``tokens``, else seconds until it would (inf: never)."""
    if delay <= tokens:
        return 0.0
    if delay > capacity or share <= 0:
        return math.inf
    return (delay - tokens) / share


def retry_after(delay: float, wait: float) -> int:
    """Retry-After for a shaped request refused for lack of budget: the sooner of two moments.

    After ``wait`` seconds the budget has room for the delay; after ``delay``
    seconds the client's bucket has drained that far (the refused request was
    given back), so the retry needs no delay at all.
    """
    return max(1, math.ceil(min(wait, delay)))


#: This process's budget (one per process: forked workers each start with a full one).
budget = ShapingBudget()
