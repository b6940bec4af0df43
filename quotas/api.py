"""The quotas app's public API for projects and the other apps (plans, usage, adaptive, dashboard).

Everything here is stable; what is not exported here (the store, the guard,
the runtime's parts, identity's internals) may change without notice, and
``tests/test_layout.py`` keeps the other apps off it. Beside this module, the
other apps use the contracts that have a module of their own: settings
(:mod:`quotas.conf`), errors (:mod:`quotas.exceptions`), signals, problem
bodies (:mod:`quotas.problems`), the rules a backend builds
(:mod:`quotas.rules`), the DRF adapter (:mod:`quotas.drf`) and the metrics
registry.

- The decision service: :class:`Facts`, :class:`Verdict`, :func:`check`, :func:`settle`.
- This process's runtime: :func:`get_runtime` (its ``rules``, ``redis``,
  ``prefix``, ``guard``, ``store`` and :meth:`~quotas.runtime.Runtime.lift_ban`);
  :func:`standing` and :func:`last_refusals` of a client; :func:`reset`.
- Clients: :func:`identify`, :func:`authenticate_key`, :func:`address_group`,
  :func:`hash_api_key`, :class:`Client`, and their tags (:func:`client_tag`,
  :func:`is_client_tag`).
- What other apps read from Redis, by the formats' owners: :data:`STORE_ERRORS`,
  :func:`connect`, :func:`client_keys`, :func:`encode_part`,
  :func:`multipliers_key`, :func:`parse_multipliers`, :data:`USAGE_COUNTERS`,
  :data:`USAGE_TTL_DAYS`, :class:`UsageCounter`, :func:`scaled`, and API keys' last use
  (:func:`read_last_used`, :func:`forget_before`, :data:`KEEP_SECONDS`).
"""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster

from quotas.exceptions import ResetNotConfirmed, StoreUnavailable
from quotas.identity.addresses import address_group
from quotas.identity.auth_failures import failed_auth
from quotas.identity.clients import Client, authenticate_key, hash_api_key, identify
from quotas.observability.refusals import read_refusals
from quotas.runtime import Runtime, get_runtime
from quotas.runtime.key_use import KEEP_SECONDS, forget_before, read_last_used
from quotas.service import Facts, Verdict, check, settle
from quotas.standing import NEAR, current_standing
from quotas.store.connect import STORE_ERRORS, connect
from quotas.store.decision import scaled
from quotas.store.keys import client_keys, client_tag, encode_part, is_client_tag, is_usage_key, multipliers_key
from quotas.store.protocol import USAGE_COUNTERS, USAGE_TTL_DAYS, UsageCounter, parse_multipliers

__all__ = [
    "KEEP_SECONDS", "NEAR", "STORE_ERRORS", "USAGE_COUNTERS", "USAGE_TTL_DAYS", "Client", "Facts", "Runtime",
    "UsageCounter", "Verdict", "address_group", "authenticate_key", "check", "client_keys", "client_tag", "connect",
    "encode_part", "forget_before", "get_runtime", "hash_api_key", "identify", "is_client_tag", "last_refusals",
    "multipliers_key", "parse_multipliers", "read_last_used", "reset", "scaled", "settle", "standing",
]  # fmt: skip


def standing(client: Client) -> dict[str, Any]:
    """``client``'s live standing (every limit and budget that applies, its plan, an upgrade offer), read with
    one peek that consumes nothing. Raises :class:`~quotas.exceptions.StoreUnavailable` when Redis fails."""
    runtime = get_runtime()
    return current_standing(client, runtime.rules.current(), runtime)


def last_refusals(tag: str) -> list[Any]:
    """The last refusals of client ``tag`` that the runtimes wrote to Redis, newest first."""
    runtime = get_runtime()
    return read_refusals(runtime.redis, runtime.prefix, tag)


#: Keys deleted per pipeline by :func:`reset`.
_BATCH = 500


def reset(*, confirm: bool = False, delete_usage: bool = False) -> int:
    """Forget every counter, ban and failed-authentication block of this project: for a project's tests.

    Deletes every Redis key under ``QUOTAS['KEY_PREFIX']`` (on every primary of
    a cluster) but the usage counters, drops what this process remembers
    (refused clients, blocks, the local fallback's counts), and bumps the rules
    version so that every other process forgets what it remembers within a
    second. Returns the number of keys deleted.

    It acts on whatever Redis ``QUOTAS['REDIS_URL']`` names, so it does nothing
    unless the caller says it means it: ``confirm=True`` (the ``quota_reset``
    fixture of :mod:`quotas.testing` does). Usage counted but not yet copied to
    the database is billing data: it is kept (keys and this process's unwritten
    counts) unless ``delete_usage=True`` too.

    Raises :class:`~quotas.exceptions.ResetNotConfirmed` without ``confirm``, and
    :class:`~quotas.exceptions.StoreUnavailable` when Redis cannot be reached.
    """
    if not confirm:
        raise ResetNotConfirmed(
            "quotas.api.reset() erases every client's counters, bans and blocks on the Redis QUOTAS['REDIS_URL'] "
            "names; call it as reset(confirm=True) (and delete_usage=True to erase unflushed usage too)."
        )
    runtime = get_runtime()
    prefix = runtime.prefix
    deleted = 0
    try:
        batch: list[bytes] = []
        for key in runtime.redis.scan_iter(match=f"{prefix}:*", count=1000):
            if not delete_usage and is_usage_key(prefix, key):
                continue
            batch.append(key)
            if len(batch) >= _BATCH:
                deleted += _delete(runtime.redis, batch)
                batch = []
        deleted += _delete(runtime.redis, batch)
    except STORE_ERRORS as exc:
        raise StoreUnavailable(f"resetting the counters failed: {exc}") from exc
    runtime.guard.deny_memory.clear()
    runtime.guard.fallback.clear()
    if delete_usage:
        runtime.guard.usage_buffer.take()  # counted before the reset: dropped with the rest
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
