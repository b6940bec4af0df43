"""The usage counters in Redis as the engine writes them off the request path and the platform reads them.

The decision script counts usage itself; what a process counted without Redis (the local fallback, refusals
from memory, allowances) is written in batches (:class:`~quotas.store.usage_batches.UsageBuffer`), or replayed
from the spool a process left at exit. The usage flush, the usage API and the dashboard read the counters
(:mod:`quotas.store.usage_hash_format` owns their format). Reads raise :class:`~quotas.exceptions.StoreUnavailable`
when Redis fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

from quotas.store.failures import unavailable
from quotas.store.usage_batches import UsageBuffer, replay_spool
from quotas.store.usage_hash_format import Counters, RowKey, Snapshot, read_rows, snapshots


def flush_mark_key(prefix: str) -> str:
    """The key holding the start (Redis server time, seconds) of the last completed usage flush."""
    return f"{prefix}:usage:flushed_at"


class UsageCounters:
    """The usage counters under ``prefix`` in the Redis ``client`` holds."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.prefix = prefix

    def write(self, buffer: UsageBuffer) -> bool:
        """Add the usage ``buffer`` holds to the day's counters; True when all was written (what was not
        stays in ``buffer`` for the next try)."""
        return buffer.flush(self._client)

    def replay_spool(self) -> int:
        """Add the usage spooled by processes that exited with Redis away, exactly once; returns the files
        replayed."""
        with unavailable("replaying the usage spool"):
            return replay_spool(self._client)

    def now(self) -> datetime:
        """The Redis server's clock: the clock usage and the history are dated with."""
        with unavailable("reading the server's clock"):
            seconds, micros = self._client.time()
        return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)

    def rows(self, days: list[date], client: str | None = None) -> dict[RowKey, Counters]:
        """The usage rows of ``days`` as Redis holds them now: every client's, or only ``client``'s."""
        with unavailable("reading usage"):
            return read_rows(self._client, self.prefix, days, client) if days else {}

    def snapshots(self, days: list[date], batch_size: int) -> Iterator[Snapshot]:
        """Every usage hash of ``days`` in atomic snapshots of ``batch_size`` keys, for the flush."""
        with unavailable("reading usage for the flush"):
            yield from snapshots(self._client, self.prefix, days, batch_size)

    def mark_flushed(self, started: datetime) -> None:
        """Record that a usage flush which started at ``started`` (Redis server time) completed."""
        with unavailable("marking the usage flush"):
            self._client.set(flush_mark_key(self.prefix), f"{started.timestamp():.6f}")

    def flush_lag(self) -> float | None:
        """Seconds from the last completed flush's start to now on the Redis clock (None: none completed)."""
        with unavailable("reading the usage flush mark"), self._client.pipeline(transaction=False) as pipe:
            pipe.get(flush_mark_key(self.prefix))
            pipe.time()
            raw, (seconds, micros) = pipe.execute()
        if raw is None:
            return None
        return max(0.0, seconds + micros / 1_000_000 - float(raw))
