"""Operators' calls on the whole keyspace of a store: answer a ping, erase it, find clients by their fields.

Neither decisions nor their notes: the health view, ``quotas.api.reset`` and the listing of failed-authentication
blocks. Every call raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
"""

from __future__ import annotations

from typing import Any

from quotas.contract.keys import is_usage_key
from quotas.store.failures import unavailable

#: Keys deleted per pipeline by :meth:`Server.erase`.
_BATCH = 500


class Server:
    """The keyspace under ``prefix`` in the Redis ``client`` holds, its client state in ``buckets`` hashes."""

    def __init__(self, client: Any, prefix: str, buckets: int) -> None:
        self._client = client
        self.prefix = prefix
        self.buckets = buckets

    def ping(self) -> None:
        """Ask Redis to answer (PING); raises :class:`StoreUnavailable`, saying why, when it does not."""
        with unavailable("PING"):
            self._client.ping()

    def erase(self, *, keep_usage: bool) -> int:
        """Delete every key under the prefix (on every primary of a cluster), but the usage counters when
        ``keep_usage``; returns how many went."""
        deleted = 0
        with unavailable("resetting the counters"):
            batch: list[bytes] = []
            for key in self._client.scan_iter(match=f"{self.prefix}:*", count=1000):
                if keep_usage and is_usage_key(self.prefix, key):
                    continue
                batch.append(key)
                if len(batch) >= _BATCH:
                    deleted += self._unlink(batch)
                    batch = []
            deleted += self._unlink(batch)
        return deleted

    def client_tags(self, field_match: str) -> dict[str, set[str]]:
        """By client tag (with braces), the window names of its fields in the bucket hashes whose names match
        ``field_match`` (a Redis MATCH pattern of ``<client>|<window>`` fields)."""
        found: dict[str, set[str]] = {}
        with unavailable("scanning the clients' fields"):
            for bucket in range(self.buckets):
                key = f"{self.prefix}:{{b{bucket}}}"
                for field, _ in self._client.hscan_iter(key, match=field_match, count=1000):
                    client, _, window = field.decode().partition("|")
                    found.setdefault("{" + client + "}", set()).add(window)
        return found

    def _unlink(self, keys: list[bytes]) -> int:
        if not keys:
            return 0
        # One key per command: a cluster routes each to its own slot.
        pipe = self._client.pipeline(transaction=False)
        for key in keys:
            pipe.unlink(key)
        return sum(pipe.execute())
