"""The in-process memory of refused and banned clients (so floods skip Redis)."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

from quotas.engine.decision import _US, WindowState
from quotas.rules.snapshot import Window


class DenyMemory:
    """Clients refused recently, per window, until their retry time (monotonic).

    Bounded (least recently refused are forgotten first) and cleared when the
    rules change, so a raised limit applies at once.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, tag: str, state: WindowState, weight: int) -> None:
        wait_us = state.window.window * _US if state.retry_us is None else state.retry_us
        until = time.monotonic() + wait_us / _US
        with self._lock:
            self._entries[(tag, state.window.state_field)] = (until, weight)
            self._entries.move_to_end((tag, state.window.state_field))
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def check(self, tag: str, windows: Sequence[Window], weight: int | None) -> list[WindowState]:
        """States for the windows this client is known to be refused by, if any."""
        if not self._entries:
            return []
        now = time.monotonic()
        hits = []
        for window in windows:
            if window.shadow:
                continue
            entry = self._entries.get((tag, window.state_field))
            if entry is None:
                continue
            until, min_weight = entry
            if until <= now:
                self._entries.pop((tag, window.state_field), None)
            elif (window.weight if weight is None else weight) >= min_weight:
                wait_us = math.ceil((until - now) * _US)
                hits.append(WindowState(window, False, None, wait_us, wait_us))
        return hits

    def ban(self, tag: str, wait_us: int) -> None:
        """Remember that ``tag`` is banned for ``wait_us`` microseconds."""
        with self._lock:
            self._entries[(tag, "!ban")] = (time.monotonic() + wait_us / _US, 0)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def banned(self, tag: str) -> int:
        """Microseconds left of a remembered ban of ``tag`` (0 if none)."""
        if not self._entries:
            return 0
        entry = self._entries.get((tag, "!ban"))
        if entry is None:
            return 0
        left = entry[0] - time.monotonic()
        if left <= 0:
            self._entries.pop((tag, "!ban"), None)
            return 0
        return math.ceil(left * _US)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
