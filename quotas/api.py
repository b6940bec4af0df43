"""The quotas app's public API for projects and the other apps: what they may call without reaching into
``quotas.store``.

- :func:`reset`: start every counter afresh (a project's tests, a staging reset).
- :class:`~quotas.service.Facts`, :class:`~quotas.service.Verdict`, :func:`~quotas.service.check`
  and :func:`~quotas.service.settle`: the decision service every front door uses.
"""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

from quotas.exceptions import StoreUnavailable
from quotas.identity.auth_failures import failed_auth
from quotas.runtime import get_runtime
from quotas.service import Facts, Verdict, check, settle
from quotas.store.connect import STORE_ERRORS

__all__ = ["Facts", "Verdict", "check", "reset", "settle"]

#: Keys deleted per pipeline by :func:`reset`.
_BATCH = 500


def reset() -> int:
    """Forget every counter, ban, failed-authentication block and usage count of this project.

    Deletes every Redis key under ``QUOTAS['KEY_PREFIX']`` (on every primary of
    a cluster), drops what this process remembers (refused clients, blocks,
    the local fallback's counts, usage not yet written), and bumps the rules
    version so that every other process forgets what it remembers within a
    second. Returns the number of keys deleted. Raises
    :class:`~quotas.exceptions.StoreUnavailable` when Redis cannot be reached.
    """
    runtime = get_runtime()
    deleted = 0
    try:
        batch: list[bytes] = []
        for key in runtime.redis.scan_iter(match=f"{runtime.prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= _BATCH:
                deleted += _delete(runtime.redis, batch)
                batch = []
        deleted += _delete(runtime.redis, batch)
    except STORE_ERRORS as exc:
        raise StoreUnavailable(f"resetting the counters failed: {exc}") from exc
    runtime.store.deny_memory.clear()
    runtime.store.fallback.clear()
    runtime.store.usage_buffer.take()  # counted before the reset: dropped with the rest
    failed_auth.clear()
    runtime.rules.invalidate()  # other processes forget what they remember
    return deleted


def _delete(client: redis.Redis | RedisCluster, keys: list[bytes]) -> int:
    if not keys:
        return 0
    # One key per command: a cluster routes each to its own slot.
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.unlink(key)
    return sum(pipe.execute())
