"""What the platform's own apps read and note in Redis besides decisions, as specific calls.

The usage flush, the usage API, the dashboard and the metrics read the usage counters, the history, keys' last
use, the flush mark and the published multipliers that the engine keeps. :class:`BackOffice` makes each of those
reads through the store's parts over a client of its own, so no app outside the engine holds a Redis client
(``tests/test_layout.py``). Its client waits longer than the request path's (``SOCKET_TIMEOUT`` is sized for a
decision, not for a scan of every usage hash); it is made on first use, so a process that never reads usage
never opens it.

Every call raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from quotas.store.backends.connect import connect
from quotas.store.history_store import ClientPoint, HistoryBucket, HistoryStore, Resolution
from quotas.store.key_use_set import KeyUseSet
from quotas.store.published_multipliers import PublishedMultipliers
from quotas.store.redis_usage import UsageCounters, flush_mark_key
from quotas.store.usage_hash_format import Counters, RowKey, Snapshot

#: Seconds a back-office read may take (a SCAN batch or a snapshot of 500 hashes), and its connect.
READ_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class _Parts:
    """The store's parts over the back office's client."""

    client: Any
    usage: UsageCounters
    history: HistoryStore
    key_use: KeyUseSet
    multipliers: PublishedMultipliers


class BackOffice:
    """The engine's Redis data as the platform's apps read it: usage, history, keys' last use, multipliers."""

    def __init__(self, url: str, prefix: str) -> None:
        self.prefix = prefix
        self._url = url
        self._parts: _Parts | None = None
        self._lock = threading.Lock()

    @property
    def _of(self) -> _Parts:
        if self._parts is None:
            with self._lock:
                if self._parts is None:
                    client = connect(self._url, READ_TIMEOUT, CONNECT_TIMEOUT)
                    self._parts = _Parts(
                        client,
                        UsageCounters(client, self.prefix),
                        HistoryStore(client, self.prefix),
                        KeyUseSet(client, self.prefix),
                        PublishedMultipliers(client, self.prefix),
                    )
        return self._parts

    def now(self) -> datetime:
        """The Redis server's clock: the clock usage and the history are dated with."""
        return self._of.usage.now()

    def usage_rows(self, days: list[date], client: str | None = None) -> dict[RowKey, Counters]:
        """The usage rows of ``days`` as Redis holds them now: every client's, or only ``client``'s."""
        return self._of.usage.rows(days, client)

    def usage_snapshots(self, days: list[date], batch_size: int) -> Iterator[Snapshot]:
        """Every usage hash of ``days`` in atomic snapshots of ``batch_size`` keys, for the flush."""
        return self._of.usage.snapshots(days, batch_size)

    def history(self, resolution: Resolution, start: datetime, end: datetime) -> list[HistoryBucket]:
        """The history's buckets from ``start`` to ``end`` (see :func:`~quotas.store.history_store.read_history`)."""
        return self._of.history.buckets(resolution, start, end)

    def top_clients(self, start: datetime, end: datetime, *, by: str, limit: int) -> list[tuple[str, int]]:
        """The clients with the most ``by`` requests from ``start`` to ``end``
        (see :func:`~quotas.store.history_store.read_top_clients`)."""
        return self._of.history.top_clients(start, end, by=by, limit=limit)

    def client_history(self, tag: str, resolution: Resolution, *, start: datetime, end: datetime) -> list[ClientPoint]:
        """Subscriber ``tag``'s minutes or hours (see :func:`~quotas.store.history_store.read_client_history`)."""
        return self._of.history.client_history(tag, resolution, start=start, end=end)

    def keys_last_used(self) -> dict[int, float]:
        """Every API key id noted as used, with the epoch seconds of its last use."""
        return self._of.key_use.last_used()

    def keys_last_used_from(self) -> dict[int, tuple[float, str]]:
        """Every API key id whose address is noted, with the epoch seconds and the address of its latest use."""
        return self._of.key_use.last_used_from()

    def forget_key_use_before(self, before: float) -> int:
        """Drop the notes of keys last used before ``before`` (epoch seconds); returns how many went."""
        return self._of.key_use.forget_before(before)

    def mark_flushed(self, started: datetime) -> None:
        """Record that a usage flush which started at ``started`` (Redis server time) completed."""
        self._of.usage.mark_flushed(started)

    def flush_lag(self) -> float | None:
        """Seconds from the last completed flush's start to now on the Redis clock (None: none completed)."""
        return self._of.usage.flush_lag()

    def multipliers(self) -> dict[int, float]:
        """The adaptive multipliers published now, by plan id (``{}``: none, every plan at 1.0)."""
        return self._of.multipliers.read()

    def close(self) -> None:
        """Drop the client (a later call makes a new one)."""
        with self._lock:
            parts, self._parts = self._parts, None
        if parts is not None:
            parts.client.close()


__all__ = ["BackOffice", "Snapshot", "flush_mark_key"]
