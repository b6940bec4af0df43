"""An application host whose clock is off from Redis's: for tests of what Redis's clock decides."""

from __future__ import annotations

import time


class HostClock:
    """The system's clock ``offset`` seconds off (``offset`` may change during a test). Not injected: the
    decisions keep the Redis server's clock (``TIME``), as in production; only what the host dates itself (the
    periods' bounds it sends, the usage day) follows it."""

    injected = False

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
