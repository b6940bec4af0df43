"""A circuit breaker in front of Redis.

Closed, every decision goes to Redis. After a failure it opens: decisions
fail at once, without a network attempt, so an outage costs a request
nothing beyond the first failed try. While open, the rules poller pings
Redis in the background every ``probe_interval`` and closes the breaker as
soon as Redis answers; without a poller, one trial call is let through per
``probe_interval`` instead.
"""

from __future__ import annotations

import logging
import threading

from quotas import metrics
from quotas.clock import SYSTEM_CLOCK, Clock
from quotas.settings import quota_settings

logger = logging.getLogger(__name__)


class CircuitBreaker:
    """Tracks whether Redis may be called (see the module docstring)."""

    def __init__(self, probe_interval: float = 0.5, clock: Clock = SYSTEM_CLOCK) -> None:
        self.probe_interval = probe_interval
        # The engine's clock (time.monotonic itself in production): with an injected clock, whether a decision
        # tries Redis while the breaker is open follows that clock, not how fast the machine ran the test.
        self._monotonic = clock.monotonic
        self.opened_at: float | None = None  # monotonic time the breaker opened
        self._last_trial = 0.0
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    def allow(self) -> bool:
        """Whether a call may go to Redis now (always when closed; a trial now and then when open)."""
        if self.opened_at is None:
            return True
        now = self._monotonic()
        with self._lock:
            if now - self._last_trial >= self.probe_interval:
                self._last_trial = now
                return True
        return False

    def failure(self) -> None:
        """A call to Redis failed: open (or keep open) the breaker."""
        with self._lock:
            now = self._monotonic()
            self._last_trial = now
            if self.opened_at is None:
                self.opened_at = now
                logger.error("quotas: Redis failed; circuit breaker open, decisions use the failure mode")
                metrics.set_engine_mode(
                    {"local": "fallback"}.get(quota_settings.FAILURE_MODE, quota_settings.FAILURE_MODE)
                )

    def success(self) -> None:
        """A call to Redis worked: close the breaker."""
        if self.opened_at is None:
            return
        with self._lock:
            if self.opened_at is not None:
                logger.warning("quotas: Redis is back after %.1f s; circuit breaker closed",
                               self._monotonic() - self.opened_at)  # fmt: skip
                self.opened_at = None
                metrics.set_engine_mode("normal")
