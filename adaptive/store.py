"""The adaptive app's Redis keys and client; every key starts with ``QUOTAS['KEY_PREFIX']``.

* ``<prefix>:adaptive:host:<host>:<pid>``: one process's latest sample (JSON, expires after SAMPLE_TTL);
* ``<prefix>:adaptive:hosts``: sorted set of those keys' names, scored by when they expire, so the
  controller reads samples with one ZRANGE and one MGET instead of scanning the keyspace;
* ``<prefix>:adaptive:multipliers``: what the controller publishes (see :mod:`adaptive.publish`);
* ``<prefix>:adaptive:state`` and ``<prefix>:adaptive:lock``: the controller's memory and run lock.
"""

from __future__ import annotations

import os
import threading

import redis

from quotas import siblings
from quotas.settings import quota_settings
from quotas.siblings import connect, encode_part


def _base() -> str:
    return f"{quota_settings.KEY_PREFIX}:adaptive"


def host_key(host: str, pid: int) -> str:
    return f"{_base()}:host:{encode_part(host)}:{pid}"


def hosts_key() -> str:
    return f"{_base()}:hosts"


def multipliers_key() -> str:
    return siblings.multipliers_key(quota_settings.KEY_PREFIX)  # where the runtime reads them


def state_key() -> str:
    return f"{_base()}:state"


def lock_key() -> str:
    return f"{_base()}:lock"


_clients: dict[tuple[int, str], redis.Redis] = {}
_clients_lock = threading.Lock()


def get_client() -> redis.Redis:
    """A client of ``QUOTAS['REDIS_URL']`` for this process (fork-safe, rebuilt if the URL changes)."""
    url = quota_settings.REDIS_URL
    key = (os.getpid(), url)
    client = _clients.get(key)
    if client is None:
        timeout = float(quota_settings.SOCKET_TIMEOUT)
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                client = connect(url, timeout * 4, connect_timeout=timeout * 4)
                _clients.clear()
                _clients[key] = client
    return client
