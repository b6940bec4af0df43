"""The Redis client the store talks to, built from one URL: the scheme selects the topology.

* ``redis://``, ``rediss://``, ``unix://``: one server; a plain :class:`redis.Redis`
  with a connection pool (redis-py's own URL parsing).
* ``redis+sentinel://[[user]:password@]host1:26379,host2:26379/<service>[/<db>]``:
  a primary watched by Sentinels; a :class:`redis.Redis` whose connections ask the
  Sentinels where the primary is, so a failover is followed on the next connect.
  The password is the primary's; ``?sentinel_password=...`` authenticates to the
  Sentinels themselves. Sentinel port defaults to 26379, db to 0.
* ``redis+cluster://[[user]:password@]host1:7000,host2:7001[/]``: a Redis Cluster;
  a :class:`redis.cluster.RedisCluster` given these startup nodes (one reachable
  node is enough: the others are discovered). Port defaults to 6379; a cluster has
  only db 0. Every key of one decision shares the client's hash tag, so each
  decision is a single-slot script call on one primary.
* ``memory://[<name>]``: no Redis; the counters live in this process
  (:mod:`quotas.store.backends.memory`), for tests and single-process development.

The URL's grammar is :mod:`quotas.formats.store_urls` (which never connects and imports no redis); what only
redis-py reads of a standalone URL (its query options) is checked here with redis-py's own parser
(:func:`standalone_problem`). :func:`connect` connects (a cluster client reads the slot map when it is built).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import parse_url as parse_standalone_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError, ResponseError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool

from quotas.formats.store_urls import STANDALONE_SCHEMES, StoreURL, parse_url
from quotas.store.backends.memory import memory_client

logger = logging.getLogger(__name__)


#: What a call through any client of :func:`connect` may raise when the store fails. redis-py's cluster
#: client raises :class:`~redis.exceptions.RedisClusterException`, which is *not* a RedisError, when no
#: node answers or a slot is not served; catch this tuple wherever ``RedisError`` alone was caught.
STORE_ERRORS: tuple[type[Exception], ...] = (RedisError, RedisClusterException)
#: Error replies that say the server cannot serve right now (a replica after a failover, a busy or
#: loading server, a cluster without quorum): an outage, unlike other error replies (see is_script_error).
_UNAVAILABLE_REPLIES = ("READONLY", "BUSY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS", "OOM")


def is_script_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an error reply about the command itself (a script bug, a key of the wrong type).

    Such an error is not an outage: it is logged and counted, and only the
    request that met it is answered by the failure mode; the circuit breaker
    stays closed. Connection errors, timeouts and the replies of a server
    that cannot serve now (:data:`_UNAVAILABLE_REPLIES`) are outages.
    """
    return isinstance(exc, ResponseError) and not str(exc).startswith(_UNAVAILABLE_REPLIES)


#: Connections a client's pool may hold open (per node of a cluster): the sync clients of :func:`connect` and
#: the asyncio clients of quotas/store/transport.py alike. redis-py 8's default is the same 100, but older releases,
#: which pyproject.toml still allows, default to 2**31 (no cap); the cap should not depend on the installed
#: redis-py. A thread or task that decides holds one connection at a time, so only a leak or a flood reaches it;
#: past it redis-py raises ConnectionError ("Too many connections") instead of opening connections without end.
MAX_CONNECTIONS = 100
#: Retries of a cluster command after a connection error or CLUSTERDOWN, each after re-reading the slot
#: map (redis-py's default is 10 with exponential backoff, seconds of blocking per request during an
#: outage). One retry follows a completed failover; anything longer is the failure mode's job.
CLUSTER_RETRIES = 1
#: Seconds between a process's checks with the Sentinels of where the primary is (see FollowingSentinelPool).
SENTINEL_CHECK_INTERVAL = 1.0


def standalone_problem(url: str) -> str | None:
    """What redis-py refuses in a ``redis://``, ``rediss://`` or ``unix://`` ``url`` (an option's value, the
    scheme's case), for the system check quotas.E002 and :func:`connect`; None for any other scheme. Never
    connects, and never repeats the URL (it may hold a password)."""
    scheme = url.partition("://")[0].lower() if isinstance(url, str) else ""
    if scheme not in STANDALONE_SCHEMES:
        return None
    try:
        parse_standalone_url(url)
    except ValueError as exc:
        return f"malformed {scheme}:// URL: {exc}"
    return None


def store_url(url: str) -> StoreURL:
    """``url`` parsed (:func:`~quotas.formats.store_urls.parse_url`) and, for one server, read by redis-py as
    :func:`connect` will; raises ValueError naming what is wrong."""
    store = parse_url(url)
    problem = standalone_problem(url)
    if problem:
        raise ValueError(problem)
    return store


def connect(url: str, timeout: float, connect_timeout: float | None = None) -> Any:
    """A Redis client for ``url`` whose reads give up after ``timeout`` seconds.

    Connects give up after ``connect_timeout`` (default: ``timeout``).

    Raises ValueError for a malformed URL, and :class:`StoreUnavailable` when no
    startup node of a cluster answers (a cluster client reads the slot map as it
    is built; the other clients connect on first use).
    """
    store = store_url(url)
    if store.topology == "memory":
        return memory_client(url)
    socket: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout if connect_timeout is None else connect_timeout,
    }
    auth: dict[str, Any] = {"username": store.username, "password": store.password}
    pool: dict[str, Any] = {"max_connections": MAX_CONNECTIONS}
    # redis-py retries timeouts by default, which could run a command twice; here only a connection
    # error is retried, once and at once (the store's scripts handle their own, see quotas/store/transport.py).
    socket["retry"] = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
    if store.topology == "standalone":
        return redis.Redis.from_url(url, **socket, **pool)
    if store.topology == "sentinel":
        sentinel_kwargs = {**socket, "password": store.sentinel_password}
        sentinel_kwargs.pop("retry")
        sentinel = Sentinel(list(store.hosts), sentinel_kwargs=sentinel_kwargs, **socket)
        # A plain redis.Redis (LuaScript keeps its direct path) whose pool finds the primary through the Sentinels.
        return sentinel.master_for(
            store.service_name, connection_pool_class=FollowingSentinelPool, db=store.db, **auth, **socket, **pool
        )
    try:
        socket.pop("retry")
        return RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in store.hosts],
            retry=Retry(NoBackoff(), CLUSTER_RETRIES),
            **auth,
            **socket,
            **pool,
        )
    except STORE_ERRORS as exc:
        # Imported here: config/settings.py imports this module, and .exceptions imports DRF.
        from quotas.exceptions import StoreUnavailable

        raise StoreUnavailable(f"no startup node of the Redis Cluster answered: {exc}") from exc


def async_connector(url: str, timeout: float, connect_timeout: float | None = None) -> Callable[[], Any] | None:
    """What makes a redis-py asyncio client for ``url`` (called once per event loop), or None where the
    topology has none here (Sentinel, Cluster: async calls then use the sync client in a worker thread)."""
    if parse_url(url).topology != "standalone":
        return None

    def make() -> Any:
        return redis.asyncio.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout if connect_timeout is None else connect_timeout,
            # As the sync client: a timeout is never retried, since the script may have run; a refused
            # connection is retried once, at once.
            retry=AsyncRetry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            max_connections=MAX_CONNECTIONS,
        )

    return make


class FollowingSentinelPool(SentinelConnectionPool):
    """A Sentinel pool that asks where the primary is at least every :data:`SENTINEL_CHECK_INTERVAL` seconds.

    redis-py asks the Sentinels only when it opens a connection, and drops one
    only when its server refuses a write (READONLY). After a failover whose old
    primary is still alive (``SENTINEL FAILOVER``, a network partition), the
    Sentinels demote that primary only about 8 s later, and pooled connections
    would keep deciding there all along: decisions that are then lost when it
    resyncs. Here, once a second at most, a connection checkout asks the
    Sentinels (one small round trip); when the primary moved, idle connections
    are closed and busy ones are dropped when released (redis-py's
    ``owns_connection``), so at most about a second of decisions can go astray.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_check = 0.0

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if now >= self._next_check and self.master_address is not None:
            self._next_check = now + SENTINEL_CHECK_INTERVAL
            try:
                self.get_master_address()  # closes idle connections if the primary moved
            except RedisError as exc:  # keep the open connections; connecting anew would fail the same way
                logger.warning("quotas: no Sentinel of %s could say where the primary is: %s", self.service_name, exc)
        return super().get_connection(*args, **kwargs)
