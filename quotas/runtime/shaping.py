"""How much shaping delay one process may hold: a leaky bucket's sleeps must not take every worker.

A shaping leaky bucket admits a request and asks it to wait its turn
(``max_delay``); the throttle sleeps inside the request. Unbounded, one client
sending at its allowed rate could keep every worker of a process asleep. So
each process has a budget of sleep, a token bucket in seconds:
``SHAPING_DELAY_BUDGET`` seconds may be slept at once (the burst), refilled at
``SHAPING_DELAY_SHARE`` seconds per second (the share of a worker's time that
may go to sleeping). A delay that does not fit is refused with 429 and the
decision is taken back.

Inside the process's budget the clients share fairly. What each client
holds drains as the budget refills, in equal parts among the clients holding
some. A client's delay is granted only if afterwards, ``k`` being the clients
that hold some (this one included), they hold at most ``k / (k + 1)`` of the
budget together and this one at most ``1 / (k + 1)`` of it (and never more
than ``SHAPING_CLIENT_SHARE``). So however many tenants shape at once and
however much they send, a client arriving next always finds room, and as the
budget refills it goes to those holding less than their share: no client can
starve the others.
"""

from __future__ import annotations

import math
import threading

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.settings import quota_settings

#: Clients holding shaping budget that one process keeps count of. Only clients holding some are kept (a
#: client is forgotten once what it held has drained); past this many, a new client's delay is refused until
#: some drain.
MAX_CLIENTS = 10_000
#: The holder of delays taken without a client.
_NO_CLIENT = ""


class ShapingBudget:
    """The seconds of shaping sleep this process may still start, shared fairly among clients (thread-safe).

    Starts full; the settings are read at each :meth:`take` (never at import). It refills by ``clock``'s
    monotonic time (the runtime's), so a test that moves the engine's clock moves it too.
    """

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._monotonic = clock.monotonic
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}  # holder -> seconds of the budget it holds (drains as the budget refills)
        self._at: float | None = None

    def take(self, delay: float, client: str | None = None, now: float | None = None) -> float:
        """Spend ``delay`` seconds of sleep for ``client``; returns 0 when granted, else seconds until it would fit.

        ``client`` (a client tag) must also stay within its fair share (see the
        module docstring); None spends from the process's budget alone. Nothing
        is spent unless the delay fits both.
        """
        capacity = float(quota_settings.SHAPING_DELAY_BUDGET)
        rate = float(quota_settings.SHAPING_DELAY_SHARE)
        fraction = float(quota_settings.SHAPING_CLIENT_SHARE)
        now = self._monotonic() if now is None else now
        with self._lock:
            self._drain(max(0.0, now - self._at) * rate if self._at is not None else 0.0)
            self._at = now
            held = sum(self._held.values())
            wait = _wait(delay, capacity - held, capacity, rate)
            holder = _NO_CLIENT if client is None else client
            if client is not None and fraction < 1:
                wait = max(wait, self._client_wait(client, delay, capacity, rate, fraction))
            if holder not in self._held and len(self._held) >= MAX_CLIENTS:
                wait = max(wait, delay)  # too many clients shaping at once: retry once some have drained
            if not wait:
                self._held[holder] = self._held.get(holder, 0.0) + delay
            return wait

    def _client_wait(self, client: str, delay: float, capacity: float, rate: float, fraction: float) -> float:
        # Called with the lock held. Its fair share now: 1 / (k + 1) of the budget, k the clients holding some
        # with this one counted, so that a client arriving next finds as much.
        if delay > capacity * fraction:
            return math.inf  # more than it could ever hold, even alone
        holders = {c for c in self._held if c != _NO_CLIENT} | {client}
        k = len(holders)
        own = self._held.get(client, 0.0)
        over_own = own + delay - capacity * min(fraction, 1 / (k + 1))
        # Room kept for a client arriving next: the clients together hold at most k / (k + 1) of the budget.
        over_all = sum(self._held.values()) + delay - capacity * k / (k + 1)
        if over_own <= 0 and over_all <= 0:
            return 0.0
        if rate <= 0:
            return math.inf
        # What it holds drains at its part of the refill, all of them at the whole refill; its share may grow
        # meanwhile, so this is an upper bound.
        return max(over_own / (rate / k), over_all / rate)

    def _drain(self, amount: float) -> None:
        # Called with the lock held. The refill is shared equally among the holders; one holding less than its
        # part is emptied, and the rest goes to the others (water-filling).
        if amount <= 0 or not self._held:
            return
        left = len(self._held)
        for holder, seconds in sorted(self._held.items(), key=lambda item: item[1]):
            part = amount / left
            left -= 1
            if seconds <= part:
                amount -= seconds
                del self._held[holder]
            else:
                self._held[holder] = seconds - part
                amount -= part

    def remembered_clients(self) -> list[str]:
        """The clients holding shaping budget now (at most :data:`MAX_CLIENTS`; any other has its whole share)."""
        with self._lock:
            return [c for c in self._held if c != _NO_CLIENT]


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
