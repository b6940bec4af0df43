"""The store of a ``REDIS_URL``: the client and transport the URL names, and the store over them; and what the
system checks and the test helpers ask of the memory store."""

from __future__ import annotations

from quotas.contract.library import LibraryCaller
from quotas.store.backends.connect import async_connector, connect
from quotas.store.backends.memory import MemoryRedis, MemoryTransport, keyspace, lua_available
from quotas.store.backends.memory.keyspace import Keyspace
from quotas.store.redis_store import RedisStore
from quotas.store.transport import Transport


def open_store(url: str, prefix: str, buckets: int, timeout: float, connect_timeout: float) -> RedisStore:
    """The store of ``url``: Redis (standalone, Sentinel or Cluster) through the transport, or the memory store
    run in this process. Raises :class:`~quotas.exceptions.StoreUnavailable` when a cluster's startup nodes do
    not answer, and ``ValueError`` for a malformed URL."""
    client = connect(url, timeout, connect_timeout)
    transport: LibraryCaller = (
        MemoryTransport(client)
        if isinstance(client, MemoryRedis)
        else Transport(client, async_connector(url, timeout, connect_timeout))
    )
    return RedisStore(transport, prefix, buckets)


def memory_store_available() -> bool:
    """Whether the memory store can run here: ``lupa``, which runs the Lua library in process, is installed."""
    return lua_available()


def memory_keyspace(url: str) -> Keyspace:
    """The memory store's keyspace ``url`` (``memory://[<name>]``) names, whose ``clock`` a test may replace."""
    return keyspace(url)
