"""The memory store: ``QUOTAS['REDIS_URL'] = "memory://"`` keeps every counter in this process, with no Redis.

For a project's test suite (real limits, real 429s, no redis-server) and for
single-process development. It is not for production: each process has its
own counters, so N processes admit N times a limit, and a restart forgets
them.

It is the same engine, not a second one: the decision scripts are the Lua
library's own source, run in process (:mod:`quotas.store.backends.memory.lua`), on a
keyspace that answers the commands they and the store's parts send, and the few
more that tests read the keys with (:mod:`quotas.store.backends.memory.keyspace`;
nothing above the store sends any). :class:`MemoryRedis` is that keyspace
behind redis-py's own command methods and reply parsing, so every part of the
store (the usage counters, the history, the last refusals) works unchanged; and
:class:`MemoryTransport` is what the store calls the scripts through.

``memory://`` names the process's default keyspace; ``memory://<name>``
another (two runtimes in one process, each its own counters). Each keyspace
reads time from a clock that a test may replace (:func:`keyspace`, then
``.clock = ...``): the scripts' ``TIME`` and key expiry both follow it.
"""

from quotas.formats.store_urls import MEMORY_SCHEME, is_memory_url
from quotas.store.backends.memory.client import (
    MemoryPipeline,
    MemoryRedis,
    MemoryScript,
    MemoryTransport,
    forget,
    keyspace,
    memory_client,
)
from quotas.store.backends.memory.lua import lua_available

__all__ = [
    "MEMORY_SCHEME", "MemoryPipeline", "MemoryRedis", "MemoryScript", "MemoryTransport", "forget", "is_memory_url",
    "keyspace", "lua_available", "memory_client",
]  # fmt: skip
