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
  (:mod:`quotas.contract.memory`), for tests and single-process development.

:func:`validate_url` and :func:`parse_url` never connect; :func:`connect` does
(a cluster client reads the slot map when it is built).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, parse_qs, quote, unquote, urlsplit

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

from quotas.contract.memory import MEMORY_SCHEME, memory_client

logger = logging.getLogger(__name__)

STANDALONE_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEME = "redis+sentinel"
CLUSTER_SCHEME = "redis+cluster"
#: Every scheme :func:`connect` accepts.
SCHEMES = (*STANDALONE_SCHEMES, SENTINEL_SCHEME, CLUSTER_SCHEME, MEMORY_SCHEME)

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

_DEFAULT_PORTS = {SENTINEL_SCHEME: 26379, CLUSTER_SCHEME: 6379}
_QUERY_OPTIONS = {SENTINEL_SCHEME: ("sentinel_password",), CLUSTER_SCHEME: ()}


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed ``REDIS_URL``. ``hosts`` are the Sentinels or the cluster's startup nodes."""

    topology: str  # "standalone", "sentinel", "cluster" or "memory"
    url: str
    hosts: tuple[tuple[str, int], ...] = ()
    service_name: str = ""  # sentinel: the monitored primary's name
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


def parse_url(url: str) -> StoreURL:
    """The topology and addresses of ``url``; raises ValueError naming what is wrong.

    Messages never repeat the URL itself (it may hold a password).
    """
    if not isinstance(url, str) or not url:
        raise ValueError("the Redis URL is empty")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed [ of an IPv6 address
        raise ValueError(f"malformed URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme in STANDALONE_SCHEMES:
        try:
            parse_standalone_url(url)
        except ValueError as exc:
            raise ValueError(f"malformed {scheme}:// URL: {exc}") from None
        return StoreURL("standalone", url)
    if scheme == MEMORY_SCHEME:
        return _memory_url(url, parts)
    if scheme not in (SENTINEL_SCHEME, CLUSTER_SCHEME):
        raise ValueError(f"unknown scheme {scheme + '://' if scheme else '(none)'}; use one of: {', '.join(SCHEMES)}")
    if parts.fragment:
        raise ValueError(f"a {scheme}:// URL takes no #fragment")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    options = _query_options(scheme, parts.query)
    hosts = tuple(_host_port(item, scheme) for item in hostlist.split(","))
    common: dict[str, Any] = {
        "url": url,
        "hosts": hosts,
        "username": unquote(username) or None,
        "password": unquote(password) or None,
    }
    segments = [unquote(s) for s in parts.path.split("/")[1:]]
    if scheme == CLUSTER_SCHEME:
        if any(segments) and segments != ["0"]:
            raise ValueError("a redis+cluster:// URL takes no path: a Redis Cluster has only database 0")
        return StoreURL("cluster", **common)
    service_name, db = _sentinel_path(segments)
    return StoreURL("sentinel", service_name=service_name, db=db, sentinel_password=options.get("sentinel_password"),
                    **common)  # fmt: skip


def _memory_url(url: str, parts: SplitResult) -> StoreURL:
    if parts.query or parts.fragment or "@" in parts.netloc or ":" in parts.netloc:
        raise ValueError("a memory:// URL takes only a name: memory:// or memory://<name>")
    return StoreURL("memory", url)


def _sentinel_path(segments: list[str]) -> tuple[str, int]:
    """``(service_name, db)`` from the path segments of a redis+sentinel:// URL; raises ValueError."""
    if not segments or not segments[0]:
        raise ValueError("a redis+sentinel:// URL needs the service name as its path: .../<service_name>[/<db>]")
    service_name, *rest = segments
    if len(rest) > 1 or (rest and not rest[0].isdigit()):
        raise ValueError("the path of a redis+sentinel:// URL is /<service_name>[/<db>] with a numeric db")
    return service_name, int(rest[0]) if rest else 0


def validate_url(url: Any) -> str | None:
    """What is wrong with ``url`` as a ``REDIS_URL`` (for system checks), or None. Never connects."""
    try:
        parse_url(url)
    except ValueError as exc:
        return str(exc)
    return None


def connect(url: str, timeout: float, connect_timeout: float | None = None) -> Any:
    """A Redis client for ``url`` whose reads give up after ``timeout`` seconds.

    Connects give up after ``connect_timeout`` (default: ``timeout``).

    Raises ValueError for a malformed URL, and :class:`StoreUnavailable` when no
    startup node of a cluster answers (a cluster client reads the slot map as it
    is built; the other clients connect on first use).
    """
    store = parse_url(url)
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


def describe(url: str) -> str:
    """The topology in a few words, for /healthz: "standalone", "sentinel (mymaster)", "cluster (3 nodes)".

    "cluster (3 nodes)" counts the startup nodes in the URL, not the cluster's
    current members. "invalid" for a URL :func:`parse_url` refuses.
    """
    try:
        store = parse_url(url)
    except ValueError:
        return "invalid"
    if store.topology == "sentinel":
        return f"sentinel ({store.service_name})"
    if store.topology == "cluster":
        count = len(store.hosts)
        return f"cluster ({count} node{'s' if count != 1 else ''})"
    if store.topology == "memory":
        return "memory (this process only)"
    return "standalone"


#: Query options that carry a secret (redis-py's ``?password=`` of a unix:// URL, and the Sentinels' own).
_SECRET_OPTIONS = ("password", "sentinel_password")


def redacted(url: str) -> str:
    """``url`` with its passwords replaced by ``***``, for messages to operators.

    Both the password in the user information (``redis://:s3cret@host``) and
    the query options that hold one are hidden; a URL that cannot be split is
    replaced as a whole (it might hold a password anywhere).
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unreadable URL)"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if ":" in userinfo:
        userinfo = userinfo.partition(":")[0] + ":***"
    query = "&".join(
        f"{name}=***" if name in _SECRET_OPTIONS else f"{name}={value}" if sep else name
        for name, sep, value in (pair.partition("=") for pair in parts.query.split("&") if pair)
    )
    if "://" not in url:  # no user information to hide (and geturl() keeps the form it was given)
        return parts._replace(query=query).geturl()
    # Rebuilt by hand: geturl() would drop the empty host of unix:///path.
    return (
        f"{parts.scheme}://{userinfo}{at}{hosts}{parts.path}"
        + (f"?{query}" if query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )


def celery_sentinel_broker(url: str) -> tuple[str, dict[str, Any]]:
    """Celery's broker URL and transport options for a ``redis+sentinel://`` URL.

    kombu names each Sentinel in its own ``sentinel://`` URL, joined by ``;``,
    and takes the service name as the ``master_name`` transport option. Raises
    ValueError if ``url`` is not a valid Sentinel URL.
    """
    store = parse_url(url)
    if store.topology != "sentinel":
        raise ValueError("not a redis+sentinel:// URL")
    userinfo = ""
    if store.username or store.password:
        userinfo = f"{quote(store.username or '', safe='')}:{quote(store.password or '', safe='')}@"
    broker = ";".join(f"sentinel://{userinfo}{_netloc(h, p)}/{store.db}" for h, p in store.hosts)
    options: dict[str, Any] = {"master_name": store.service_name}
    if store.sentinel_password:
        options["sentinel_kwargs"] = {"password": store.sentinel_password}
    return broker, options


def _query_options(scheme: str, query: str) -> dict[str, str]:
    try:
        pairs = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ValueError(f"malformed query string in a {scheme}:// URL") from None
    allowed = _QUERY_OPTIONS[scheme]
    unknown = sorted(set(pairs) - set(allowed))
    if unknown:
        hint = f"; only {', '.join(allowed)} is understood" if allowed else "; it takes no options"
        raise ValueError(f"unknown option {', '.join(unknown)} in a {scheme}:// URL{hint}")
    return {name: values[-1] for name, values in pairs.items()}


#: The highest TCP port.
_PORT_MAX = 65535


def _host_port(item: str, scheme: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` from a comma-separated host list."""
    if not item:
        raise ValueError(f"a {scheme}:// URL needs host:port[,host:port...] and has an empty host")
    if item.startswith("["):
        host, sep, rest = item[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"malformed IPv6 address {item!r} in a {scheme}:// URL")
        port_text = rest[1:]
    else:
        host, _, port_text = item.partition(":")
        if ":" in port_text:
            raise ValueError(f"an IPv6 address in a {scheme}:// URL needs brackets: [{item}]:port")
    if not host:
        raise ValueError(f"a host is missing before {item!r} in a {scheme}:// URL")
    if not port_text:
        return host, _DEFAULT_PORTS[scheme]
    if not port_text.isdigit() or not 0 < int(port_text) <= _PORT_MAX:
        raise ValueError(f"bad port {port_text!r} for {host} in a {scheme}:// URL")
    return host, int(port_text)


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
