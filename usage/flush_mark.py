"""When the last usage flush that completed started, kept in Redis for every process to read.

A flush copies every counter as it was at its start; what was counted after that waits for the next one.
So ``Redis time now - the last completed flush's start`` is the age of the oldest usage that may not be in
the database yet: the ``quota_usage_flush_lag_seconds`` gauge (:func:`flush_lag_series`), which keeps growing
while flushes fail or no worker runs them, as an alert wants.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from quotas.conf import quota_settings
from quotas.metrics import DefaultSeries
from quotas.siblings import get_runtime


def mark_key(prefix: str) -> str:
    """The key holding the start (Redis server time, seconds) of the last completed flush."""
    return f"{prefix}:usage:flushed_at"


def mark_flushed(redis_client: Any, prefix: str, started: datetime) -> None:
    """Record that a flush which started at ``started`` (Redis server time) completed."""
    redis_client.set(mark_key(prefix), f"{started.timestamp():.6f}")


def flush_lag(redis_client: Any, prefix: str) -> float | None:
    """Seconds from the last completed flush's start to now on the Redis clock (None: no flush completed)."""
    with redis_client.pipeline(transaction=False) as pipe:
        pipe.get(mark_key(prefix))
        pipe.time()
        raw, (seconds, micros) = pipe.execute()
    if raw is None:
        return None
    return max(0.0, seconds + micros / 1_000_000 - float(raw))


def flush_lag_series() -> Iterator[DefaultSeries]:
    """``quota_usage_flush_lag_seconds`` at each scrape (no series before the first flush completes)."""
    lag = flush_lag(get_runtime().redis, quota_settings.KEY_PREFIX)
    if lag is not None:
        yield {}, round(lag, 3)
