"""What the platform's own apps read and note in Redis besides decisions, as specific calls.

The usage flush, the usage API, the dashboard and the metrics read the usage counters, the history, keys' last
use, the flush mark and the published multipliers that the engine keeps. :class:`BackOffice` makes each of those
reads with a client of its own, so no app outside the engine holds a Redis client (``tests/test_layout.py``).
Its client waits longer than the request path's (``SOCKET_TIMEOUT`` is sized for a decision, not for a scan of
every usage hash); it is made on first use, so a process that never reads usage never opens it.

Every call raises what the client raises (``quotas.contract.connect.STORE_ERRORS``) when Redis fails.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

from quotas.contract.connect import connect
from quotas.contract.keys import multipliers_key
from quotas.contract.protocol import parse_multipliers
from quotas.observability.history import (
    ClientPoint,
    HistoryBucket,
    Resolution,
    read_client_history,
    read_history,
    read_top_clients,
)
from quotas.runtime.key_use import forget_before, read_last_used
from quotas.store.usage_hashes import Counters, RowKey, Snapshot, read_rows, snapshots

#: Seconds a back-office read may take (a SCAN batch or a snapshot of 500 hashes), and its connect.
READ_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0


def flush_mark_key(prefix: str) -> str:
    """The key holding the start (Redis server time, seconds) of the last completed usage flush."""
    return f"{prefix}:usage:flushed_at"


class BackOffice:
    """The engine's Redis data as the platform's apps read it: usage, history, keys' last use, multipliers."""

    def __init__(self, url: str, prefix: str) -> None:
        self.prefix = prefix
        self._url = url
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def _redis(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = connect(self._url, READ_TIMEOUT, CONNECT_TIMEOUT)
        return self._client

    def now(self) -> datetime:
        """The Redis server's clock: the clock usage and the history are dated with."""
        seconds, micros = self._redis.time()
        return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)

    def usage_rows(self, days: list[date], client: str | None = None) -> dict[RowKey, Counters]:
        """The usage rows of ``days`` as Redis holds them now: every client's, or only ``client``'s."""
        return read_rows(self._redis, self.prefix, days, client) if days else {}

    def usage_snapshots(self, days: list[date], batch_size: int) -> Iterator[Snapshot]:
        """Every usage hash of ``days`` in atomic snapshots of ``batch_size`` keys, for the flush."""
        return snapshots(self._redis, self.prefix, days, batch_size)

    def history(self, resolution: Resolution, start: datetime, end: datetime) -> list[HistoryBucket]:
        """The history's buckets from ``start`` to ``end`` (see :func:`~quotas.observability.history.read_history`)."""
        return read_history(self._redis, self.prefix, resolution, start, end)

    def top_clients(self, start: datetime, end: datetime, *, by: str, limit: int) -> list[tuple[str, int]]:
        """The clients with the most ``by`` requests from ``start`` to ``end``
        (see :func:`~quotas.observability.history.read_top_clients`)."""
        return read_top_clients(self._redis, self.prefix, start, end, by=by, limit=limit)

    def client_history(self, tag: str, resolution: Resolution, *, start: datetime, end: datetime) -> list[ClientPoint]:
        """Subscriber ``tag``'s minutes or hours (see :func:`~quotas.observability.history.read_client_history`)."""
        return read_client_history(self._redis, self.prefix, tag, resolution, start=start, end=end)

    def keys_last_used(self) -> dict[int, float]:
        """Every API key id noted as used, with the epoch seconds of its last use."""
        return read_last_used(self._redis, self.prefix)

    def forget_key_use_before(self, before: float) -> int:
        """Drop the notes of keys last used before ``before`` (epoch seconds); returns how many went."""
        return forget_before(self._redis, self.prefix, before)

    def mark_flushed(self, started: datetime) -> None:
        """Record that a usage flush which started at ``started`` (Redis server time) completed."""
        self._redis.set(flush_mark_key(self.prefix), f"{started.timestamp():.6f}")

    def flush_lag(self) -> float | None:
        """Seconds from the last completed flush's start to now on the Redis clock (None: none completed)."""
        with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(flush_mark_key(self.prefix))
            pipe.time()
            raw, (seconds, micros) = pipe.execute()
        if raw is None:
            return None
        return max(0.0, seconds + micros / 1_000_000 - float(raw))

    def multipliers(self) -> dict[int, float]:
        """The adaptive multipliers published now, by plan id (``{}``: none, every plan at 1.0)."""
        return parse_multipliers(self._redis.get(multipliers_key(self.prefix)))

    def close(self) -> None:
        """Drop the client (a later call makes a new one)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


__all__ = ["BackOffice", "Snapshot", "flush_mark_key"]
