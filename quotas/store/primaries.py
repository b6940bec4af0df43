"""Each Redis server a decision may run on, asked one by one: for ``manage.py quota_doctor``.

The one server, the primary behind the Sentinels, or every primary of a cluster. Every call raises
:class:`~quotas.exceptions.StoreUnavailable` (:class:`~quotas.exceptions.ScriptFailed` for an error reply)
when the server fails.
"""

from __future__ import annotations

import hashlib
from typing import Any

from redis.cluster import RedisCluster
from redis.exceptions import ResponseError

from quotas.contract.library import library_name, script_source
from quotas.store.backends.memory import MemoryRedis
from quotas.store.failures import unavailable


class Primary:
    """One server, with a client of it alone; ``name`` is "" for the one server of a non-cluster store."""

    def __init__(self, name: str, client: Any) -> None:
        self.name = name
        self._client = client

    def ping(self) -> None:
        """PING."""
        with unavailable("PING"):
            self._client.ping()

    def version(self) -> tuple[int, ...]:
        """Its Redis version (INFO server), as numbers."""
        with unavailable("INFO server"):
            text = str(self._client.info("server").get("redis_version", "0"))
        return tuple(int(p) for p in text.split(".") if p.isdigit())

    def time(self) -> float:
        """Its clock (TIME), in seconds since the epoch."""
        with unavailable("TIME"):
            seconds, micros = self._client.time()
        return seconds + micros / 1_000_000

    def has_library(self, functions: bool) -> tuple[bool, str]:
        """Whether the server has this release's Lua, and how it was asked: its function library (``functions``:
        Redis 7+), else the decide script (Redis 6.2, called by EVALSHA)."""
        sha = hashlib.sha1(script_source("decide").encode("utf-8")).hexdigest()  # as the transport loads it
        with unavailable("asking for the Lua library"):
            if functions:
                try:
                    listed = self._client.function_list(library=library_name())
                except ResponseError as exc:  # e.g. NOPERM: this ACL user may not list functions; calls by EVALSHA
                    refused = f"FUNCTION LIST refused ({str(exc).split(' ', 1)[0]}), so decide is called by EVALSHA"
                    return bool(self._client.script_exists(sha)[0]), f"{refused}; script {sha[:12]} (SCRIPT EXISTS)"
                names = {_field(entry, "library_name") for entry in listed}
                return library_name() in names, f"function library {library_name()} (FUNCTION LIST)"
            how = f"Redis 6.2 has no functions, so decide is called by EVALSHA; script {sha[:12]} (SCRIPT EXISTS)"
            return bool(self._client.script_exists(sha)[0]), how


class Primaries:
    """The servers behind the Redis ``client`` a store holds."""

    def __init__(self, client: Any) -> None:
        self._client = client

    @property
    def in_process(self) -> bool:
        """Whether the store is the memory store of this process: no server to ask."""
        return isinstance(self._client, MemoryRedis)

    def all(self) -> list[Primary]:
        """Each server a decision may run on (every primary of a cluster)."""
        client = self._client
        if isinstance(client, RedisCluster):
            return [Primary(node.name, client.get_redis_connection(node)) for node in client.get_primaries()]
        return [Primary("", client)]


def _field(entry: Any, name: str) -> str:
    """A field of one FUNCTION LIST entry: a dict (RESP3) or a flat list of names and values (RESP2)."""
    pairs = entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2], strict=True))
    for key, value in pairs.items():
        if (key.decode() if isinstance(key, bytes) else key) == name:
            return value.decode() if isinstance(value, bytes) else str(value)
    return ""
