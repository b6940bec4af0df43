"""The ``local`` failure mode: each process enforces its share of every limit in memory.

While Redis is unreachable, a process decides with the same windows, their
quotas scaled by ``QUOTAS['LOCAL_SHARE']`` (set it to about 1 / the number of
worker processes, so that together they stay near the real limit). Every
rate window is metered as a token bucket of its (scaled) quota over its
window, periods and budgets as counters per period; concurrency limits are
not enforced. It is a deliberate approximation that holds for the length of
an outage: the state is per process, bounded, and dropped when Redis is back.

Money and period quotas are not started afresh: every Redis decision leaves
here what remained of its budgets and periods (:meth:`LocalLimiter.remember`),
and during an outage a process spends at most LOCAL_SHARE of that remainder.
With N processes the outage spends at most N x LOCAL_SHARE x R, R being the
largest remainder any of them last saw from Redis: with LOCAL_SHARE = 1 / N,
no more than was left. A client no process decided in Redis this period gets
LOCAL_SHARE of the whole quota. What is spent locally is counted in usage,
and what budgets spent is charged to Redis once it answers
(:mod:`quotas.store.money.owed`), so the period's later requests see it: the outage
overspends a budget by at most what the processes admitted during it.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.protocol import US_PER_SECOND
from quotas.formats.periods import period_bounds
from quotas.rules.limits import Window
from quotas.settings import quota_settings
from quotas.store.decision import Decision, WindowState, scaled

#: One window checked: its state, and what consumes from it once every window of the request agreed (or None).
_Checked = tuple[WindowState, Callable[[], None] | None]


class LocalLimiter:
    """In-memory limits for one process (see the module docstring)."""

    def __init__(self, share: float, size: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.share = share
        self.clock = clock
        self.size = size
        self._state: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        # (tag, window) -> (end of its period, what remained of it): from the last Redis decision.
        self._known: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, tag: str, states: Sequence[WindowState], now: float) -> None:
        """Keep what remained of ``tag``'s budgets and periods after a Redis decision at ``now``."""
        with self._lock:
            for state in states:
                if state.window.period and state.remaining is not None:
                    key = (tag, state.window.state_field)
                    self._known[key] = (now + state.reset_us / US_PER_SECOND, int(state.remaining))
                    self._known.move_to_end(key)
            while len(self._known) > self.size:
                self._known.popitem(last=False)

    def decide(
        self,
        tag: str,
        windows: Sequence[Window],
        weight: int | None = None,
        cost_micros: int = 0,
        multiplier: float = 1.0,
    ) -> Decision:
        """Check and consume like the decision script, all or nothing, in this process only."""
        now = self.clock.now()
        with self._lock:
            checks = [self._check(tag, w, now, weight=weight, cost=cost_micros, multiplier=multiplier) for w in windows]
            allowed = all(state.ok or state.window.shadow for state, _ in checks)
            if allowed:
                for state, commit in checks:
                    if state.ok and commit is not None:
                        commit()
            while len(self._state) > self.size:
                self._state.popitem(last=False)
        decision = Decision(
            allowed=allowed, states=[s for s, _ in checks], now=now, weight=weight, local=True, tag=tag,
            multiplier=multiplier,
        )  # fmt: skip
        decision.cost_micros = cost_micros
        decision.fallback = True
        return decision

    def adjust(self, tag: str, windows: Sequence[Window], delta: int, at: float) -> None:
        """Move what ``tag`` spent of each budget window by ``delta`` micro-units (a reconciliation), if the
        period of ``at`` (the decision's time) is still the one this process counts."""
        with self._lock:
            for w in windows:
                slot = self._state.get((tag, w.state_field))
                bounds = period_bounds(w.period, at, quota_settings.BUDGET_TIME_ZONE, w.anchor_day)
                if slot is not None and slot[0] == bounds.start:
                    slot[1] = max(0, slot[1] + delta)

    def clear(self) -> None:
        """Forget the outage's state (Redis is back); what remained of budgets is kept for the next."""
        with self._lock:
            self._state.clear()

    def _slot(self, tag: str, window: Window, default: list[float]) -> list[float]:
        key = (tag, window.state_field)
        slot = self._state.get(key)
        if slot is None:
            slot = self._state[key] = default
        self._state.move_to_end(key)
        return slot

    def _check(self, tag: str, w: Window, now: float, *, weight: int | None, cost: int, multiplier: float) -> _Checked:
        if w.algorithm == "concurrency":
            return WindowState(window=w, ok=True, remaining=None, reset_us=0, retry_us=0), None
        if w.period:
            return self._check_period(tag, w, now, weight=weight, cost=cost)
        quota = max(1, math.floor(scaled(w, multiplier) * self.share))
        units = w.weight if weight is None else weight
        interval = w.window / quota  # seconds per unit
        slot = self._slot(tag, w, [now])
        tat = max(slot[0], now)
        new_tat = tat + units * interval
        if new_tat - now <= quota * interval + 1e-9:
            remaining = math.floor((quota * interval - (new_tat - now)) / interval + 1e-9)

            def commit(slot: list[float] = slot, value: float = new_tat) -> None:
                slot[0] = value

            reset_us = int((new_tat - now) * US_PER_SECOND)
            admitted = WindowState(window=w, ok=True, remaining=remaining, reset_us=reset_us, retry_us=0, quota=quota)
            return admitted, commit
        retry = None if units > quota else int((new_tat - now - quota * interval) * US_PER_SECOND) + 1
        reset_us = int((tat - now) * US_PER_SECOND)
        return WindowState(window=w, ok=False, remaining=0, reset_us=reset_us, retry_us=retry, quota=quota), None

    def _check_period(self, tag: str, w: Window, now: float, *, weight: int | None, cost: int) -> _Checked:
        bounds = period_bounds(w.period, now, quota_settings.BUDGET_TIME_ZONE, w.anchor_day)
        known = self._known.get((tag, w.state_field))
        if known is not None and abs(known[0] - bounds.end) < 1.0:
            # Redis said what remained of this very period: spend this process's share of that only.
            quota = max(0, math.floor(known[1] * self.share))
        else:
            quota = max(1, math.floor(w.quota * self.share))
        units = (
            cost
            if w.is_budget
            else (1 if w.algorithm == "period_requests" else (w.weight if weight is None else weight))
        )
        slot = self._slot(tag, w, [bounds.start, 0])
        if slot[0] != bounds.start:
            slot[0], slot[1] = bounds.start, 0
        reset = int((bounds.end - now) * US_PER_SECOND)
        if slot[1] + units <= quota:

            def commit(slot: list[float] = slot, units: int = units) -> None:
                slot[1] += units

            admitted = WindowState(
                window=w, ok=True, remaining=int(quota - slot[1] - units), reset_us=reset, retry_us=0,
                used=int(slot[1] + units), quota=quota,
            )  # fmt: skip
            return admitted, commit
        refused = WindowState(
            window=w, ok=False, remaining=int(max(0, quota - slot[1])), reset_us=reset, retry_us=reset,
            used=int(slot[1]), quota=quota,
        )  # fmt: skip
        return refused, None
