"""A ``REDIS_URL`` as text: its scheme names the topology (see :mod:`quotas.store.backends.connect` for the clients).

* ``redis://``, ``rediss://``, ``unix://``: one server. Only the scheme and the port are read here; the rest
  of such a URL is redis-py's to read, and the store's backend checks it with redis-py's own parser
  (:func:`quotas.store.backends.connect.standalone_problem`), so nothing here imports redis.
* ``redis+sentinel://[[user]:password@]host1:26379,host2:26379/<service>[/<db>]``:
  a primary watched by Sentinels. The password is the primary's; ``?sentinel_password=...``
  authenticates to the Sentinels themselves. Sentinel port defaults to 26379, db to 0.
* ``redis+cluster://[[user]:password@]host1:7000,host2:7001[/]``: a Redis Cluster's
  startup nodes. Port defaults to 6379; a cluster has only db 0.
* ``memory://[<name>]``: no Redis; the counters live in this process, for tests and
  single-process development.

Nothing here connects: the system checks validate the URL, operators' messages describe it with its
passwords hidden, and Celery's broker options are derived from it. A format, below every layer that reads it
(the settings' checks, the store's backends, the operators' commands).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, parse_qs, quote, unquote, urlsplit

STANDALONE_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_SCHEME = "redis+sentinel"
CLUSTER_SCHEME = "redis+cluster"
MEMORY_SCHEME = "memory"
#: Every scheme :func:`~quotas.store.backends.connect.connect` accepts.
SCHEMES = (*STANDALONE_SCHEMES, SENTINEL_SCHEME, CLUSTER_SCHEME, MEMORY_SCHEME)

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
            parts.port  # noqa: B018  # reading it raises ValueError for a port that is not one, as redis-py finds
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


def is_memory_url(url: Any) -> bool:
    """Whether ``url`` names the memory store."""
    return isinstance(url, str) and url.lower().startswith(MEMORY_SCHEME + "://")


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
