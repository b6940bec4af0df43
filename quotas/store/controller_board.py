"""The adaptive controller's keys in Redis: host samples, its memory and run lock, and what it publishes.

Every key starts with ``<prefix>:adaptive``:

* ``:host:<host>:<pid>``: one process's latest load sample (JSON, expires after its TTL);
* ``:hosts``: sorted set of those keys' names, scored by when they expire, so the controller reads samples
  with one ZRANGE and one MGET instead of scanning the keyspace;
* ``:multipliers``: what the controller publishes (:class:`~quotas.store.published_multipliers.PublishedMultipliers`);
* ``:state`` and ``:lock``: the controller's memory and run lock.

The controller coordinates workers on many hosts through these keys, so its board has a client of its own
(:func:`controller_board`). Every call raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
"""

from __future__ import annotations

import time
from typing import Any

from redis.exceptions import LockError

from quotas.contract.keys import encode_part
from quotas.store.backends.connect import connect
from quotas.store.failures import unavailable
from quotas.store.published_multipliers import PublishedMultipliers


def host_key(prefix: str, host: str, pid: int) -> str:
    """The key of process ``pid`` of ``host``'s latest sample."""
    return f"{prefix}:adaptive:host:{encode_part(host)}:{pid}"


def hosts_key(prefix: str) -> str:
    """The index of the sample keys."""
    return f"{prefix}:adaptive:hosts"


def state_key(prefix: str) -> str:
    """The controller's memory between runs (JSON)."""
    return f"{prefix}:adaptive:state"


def lock_key(prefix: str) -> str:
    """The lock a controller run holds."""
    return f"{prefix}:adaptive:lock"


class RunLock:
    """A controller run's lock: taken without waiting, released at the run's end."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock

    def acquire(self) -> bool:
        """Take the lock; False when another run holds it."""
        with unavailable("taking the controller's lock"):
            return bool(self._lock.acquire())

    def release(self) -> bool:
        """Release the lock; False when the run outlived it (it expired, or another run took it since)."""
        with unavailable("releasing the controller's lock"):
            try:
                self._lock.release()
            except LockError:
                return False
        return True


class ControllerBoard:
    """The adaptive controller's keys under ``prefix`` in the Redis ``client`` holds."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.prefix = prefix
        self.multipliers = PublishedMultipliers(client, prefix)

    def server_time(self) -> float:
        """The Redis server's clock, shared by every worker, in seconds since the epoch."""
        with unavailable("reading the server's clock"):
            seconds, micros = self._client.time()
        return seconds + micros / 1_000_000

    def run_lock(self, timeout: float) -> RunLock:
        """The lock of a controller run, which expires after ``timeout`` seconds."""
        return RunLock(self._client.lock(lock_key(self.prefix), timeout=timeout, blocking=False))

    def state(self) -> bytes | None:
        """The controller's stored memory (JSON), or None before its first run."""
        with unavailable("reading the controller's state"):
            raw = self._client.get(state_key(self.prefix))
        return raw if raw is None or isinstance(raw, bytes) else str(raw).encode()

    def save_state(self, text: str) -> None:
        """Store the controller's memory ``text`` (JSON) for its next run."""
        with unavailable("storing the controller's state"):
            self._client.set(state_key(self.prefix), text)

    def publish_sample(self, host: str, pid: int, text: str, ttl: float) -> None:
        """Store one process's load sample ``text`` (JSON) for ``ttl`` seconds, and index its key."""
        key = host_key(self.prefix, host, pid)
        with unavailable("publishing a load sample"):
            pipe = self._client.pipeline(transaction=False)
            pipe.set(key, text, px=max(1, int(ttl * 1000)))
            pipe.zadd(hosts_key(self.prefix), {key: time.time() + ttl})
            pipe.execute()

    def samples(self, now: float, forget_after: float) -> list[bytes]:
        """Every live sample (JSON); the names of keys expired for ``forget_after`` seconds leave the index."""
        index = hosts_key(self.prefix)
        with unavailable("reading the load samples"):
            # Member names only: the stubs type zrange's reply as any of its forms, scored pairs included.
            names = [name for name in self._client.zrange(index, 0, -1) if isinstance(name, bytes | str)]
            if not names:
                return []
            raws = [raw for raw in self._client.mget(names) if raw is not None]  # None: expired, stopped reporting
            # Scores are the publishers' clocks: the generous margin keeps clock skew harmless.
            self._client.zremrangebyscore(index, "-inf", now - forget_after)
        return raws


def controller_board(url: str, prefix: str, timeout: float) -> ControllerBoard:
    """A board of ``url`` on a client of its own, its reads giving up after ``timeout`` seconds (the runtime keeps
    one: :meth:`quotas.runtime.Runtime.controller_board`)."""
    return ControllerBoard(connect(url, timeout, connect_timeout=timeout), prefix)
