"""The in-process memory of refused and banned clients (so floods skip Redis)."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.contract.protocol import US_PER_SECOND
from quotas.rules.limits import Window
from quotas.store.decision import WindowState


class _Refusal(NamedTuple):
    """What Redis said when it refused a client in one window; deadlines are monotonic seconds."""

    until: float  # when the same request could be admitted (its retry time)
    min_weight: int  # the weight refused: lighter requests still go to Redis
    reset_at: float  # when the window's full quota is back, as Redis reported it
    remaining: int  # what Redis said remained (less than min_weight)
    quota: int  # the quota in force (an adaptive multiplier may have scaled it)


class DenyMemory:
    """Clients refused recently, per window, until their retry time (monotonic).

    Bounded (least recently refused are forgotten first) and cleared when the
    rules change, so a raised limit applies at once. A refusal answered from
    here reports what Redis reported (the remaining units, and the reset
    counted down from Redis's), so its headers match the 429 before it.
    """

    def __init__(self, size: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.size = size
        self._monotonic = clock.monotonic  # the runtime's clock, bound once
        # Public for one reason: the guard skips the memory while it is empty (most of the time), without a call.
        self.entries: OrderedDict[tuple[str, str], _Refusal] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, tag: str, state: WindowState, weight: int) -> None:
        """Remember that ``state`` (from Redis) refused ``tag`` a request of ``weight`` units."""
        now = self._monotonic()
        wait_us = state.window.window * US_PER_SECOND if state.retry_us is None else state.retry_us
        until = now + wait_us / US_PER_SECOND
        refusal = _Refusal(
            until, weight, max(until, now + state.reset_us / US_PER_SECOND), max(0, state.remaining or 0), state.quota
        )
        with self._lock:
            self.entries[(tag, state.window.state_field)] = refusal
            self.entries.move_to_end((tag, state.window.state_field))
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)

    def check(self, tag: str, windows: Sequence[Window], weight: int | None) -> list[WindowState]:
        """States for the windows this client is known to be refused by, if any."""
        if not self.entries:
            return []
        now = self._monotonic()
        hits = []
        for window in windows:
            if window.shadow:
                continue
            entry = self.entries.get((tag, window.state_field))
            if entry is None:
                continue
            if entry.until <= now:
                self.entries.pop((tag, window.state_field), None)
            elif (window.weight if weight is None else weight) >= entry.min_weight:
                wait_us = math.ceil((entry.until - now) * US_PER_SECOND)
                reset_us = math.ceil((entry.reset_at - now) * US_PER_SECOND)
                hits.append(
                    WindowState(
                        window=window, ok=False, remaining=entry.remaining, reset_us=reset_us, retry_us=wait_us,
                        quota=entry.quota,
                    )
                )  # fmt: skip
        return hits

    def ban(self, tag: str, wait_us: int) -> None:
        """Remember that ``tag`` is banned for ``wait_us`` microseconds."""
        with self._lock:
            until = self._monotonic() + wait_us / US_PER_SECOND
            self.entries[(tag, "!ban")] = _Refusal(until, 0, until, 0, 0)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)

    def banned(self, tag: str) -> int:
        """Microseconds left of a remembered ban of ``tag`` (0 if none)."""
        if not self.entries:
            return 0
        entry = self.entries.get((tag, "!ban"))
        if entry is None:
            return 0
        left = entry.until - self._monotonic()
        if left <= 0:
            self.entries.pop((tag, "!ban"), None)
            return 0
        return math.ceil(left * US_PER_SECOND)

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
