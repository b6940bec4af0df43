"""quotas.store.backends.connect: the REDIS_URL scheme selects the topology; malformed URLs are refused with a
reason."""

from __future__ import annotations

import time

import pytest
import redis
from redis.sentinel import SentinelConnectionPool

from config.embedded_redis import free_port
from quotas.exceptions import StoreUnavailable
from quotas.formats.store_urls import celery_sentinel_broker, describe, parse_url, redacted, validate_url
from quotas.store.backends.connect import connect


@pytest.mark.parametrize(
    ("url", "topology", "hosts", "service", "db"),
    [
        ("redis://127.0.0.1:6379/0", "standalone", (), "", 0),
        ("rediss://cache.example:6380/2", "standalone", (), "", 0),
        ("unix:///run/redis.sock", "standalone", (), "", 0),
        ("redis+sentinel://s1:26379,s2:26380/mymaster", "sentinel", (("s1", 26379), ("s2", 26380)), "mymaster", 0),
        ("redis+sentinel://s1,[::1]:5000/quotas/3", "sentinel", (("s1", 26379), ("::1", 5000)), "quotas", 3),
        ("redis+cluster://c1:7000,c2:7001,c3:7002", "cluster", (("c1", 7000), ("c2", 7001), ("c3", 7002)), "", 0),
        ("redis+cluster://c1/", "cluster", (("c1", 6379),), "", 0),
    ],
)
def test_the_scheme_selects_the_topology(url, topology, hosts, service, db):
    """Hosts are comma-separated with default ports; a Sentinel URL's path is /<service>[/<db>]."""
    parsed = parse_url(url)
    assert (parsed.topology, parsed.hosts, parsed.service_name, parsed.db) == (topology, hosts, service, db)
    assert validate_url(url) is None


def test_credentials_are_decoded_and_never_echoed():
    """user:password@ is percent-decoded; the Sentinels' own password is a query option."""
    parsed = parse_url("redis+sentinel://app:p%40ss@s1/mymaster?sentinel_password=s3cret")
    assert (parsed.username, parsed.password, parsed.sentinel_password) == ("app", "p@ss", "s3cret")
    assert "p@ss" not in (validate_url("redis+sentinel://app:p%40ss@s1:x/mymaster") or "")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty"),
        ("http://127.0.0.1:6379", "unknown scheme http://"),
        ("127.0.0.1:6379", "unknown scheme"),
        ("redis://127.0.0.1:port/0", "malformed redis://"),
        ("redis+sentinel://s1:26379", "needs the service name"),
        ("redis+sentinel://s1/mymaster/zero", "numeric db"),
        ("redis+sentinel://s1/mymaster/0/extra", "/<service_name>[/<db>]"),
        ("redis+sentinel://s1,,s2/mymaster", "empty host"),
        ("redis+sentinel://s1:99999/mymaster", "bad port '99999'"),
        ("redis+sentinel://s1/mymaster?password=x", "unknown option password"),
        ("redis+cluster://c1:7000/1", "only database 0"),
        ("redis+cluster://::1:7000", "needs brackets"),
        ("redis+cluster://[::1:7000", "malformed URL: Invalid IPv6"),
        ("redis+cluster://:7000", "host is missing"),
        ("redis+cluster://[::1]x", "malformed IPv6"),
        ("redis+cluster://c1?ssl=true", "takes no options"),
    ],
)
def test_malformed_urls_are_refused_with_the_reason(url, message):
    """validate_url returns the problem (for the system check); parse_url and connect raise ValueError."""
    assert message in validate_url(url)
    with pytest.raises(ValueError, match=r".+"):
        connect(url, 0.1)


@pytest.mark.parametrize(
    ("url", "text"),
    [
        ("redis://127.0.0.1:6379/0", "standalone"),
        ("redis+sentinel://s1,s2,s3/mymaster", "sentinel (mymaster)"),
        ("redis+cluster://c1:7000,c2:7001,c3:7002", "cluster (3 nodes)"),
        ("redis+cluster://c1:7000", "cluster (1 node)"),
        ("nonsense", "invalid"),
    ],
)
def test_describe_names_the_topology(url, text):
    assert describe(url) == text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:s3cret@cache:6379/0", "redis://:***@cache:6379/0"),
        ("rediss://app:s3cret@cache:6380/2", "rediss://app:***@cache:6380/2"),
        ("redis://app@cache:6379", "redis://app@cache:6379"),
        ("unix:///run/redis.sock?db=1&password=s3cret", "unix:///run/redis.sock?db=1&password=***"),
        (
            "redis+sentinel://:s3cret@s1,s2:26380/mymaster/1?sentinel_password=other",
            "redis+sentinel://:***@s1,s2:26380/mymaster/1?sentinel_password=***",
        ),
        ("redis+cluster://u:p%40ss@c1:7000,c2:7001", "redis+cluster://u:***@c1:7000,c2:7001"),
        ("redis://[::1", "(an unreadable URL)"),
    ],
)
def test_redacted_hides_every_password(url, shown):
    """What operators' messages show of REDIS_URL: where it points, never a password."""
    assert redacted(url) == shown


def test_a_sentinel_client_is_a_plain_client_that_asks_the_sentinels():
    """No connection is made until first use; the pool resolves the primary through the Sentinels."""
    client = connect("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster/2", 0.2)
    assert type(client) is redis.Redis  # quotas.store.transport.LuaScript keeps its direct EVALSHA path
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert (pool.service_name, pool.connection_kwargs["db"], pool.connection_kwargs["socket_timeout"]) == (
        "mymaster", 2, 0.2,
    )  # fmt: skip
    assert [s.connection_pool.connection_kwargs["port"] for s in pool.sentinel_manager.sentinels] == [1, 2]


def test_an_unreachable_cluster_raises_store_unavailable_quickly():
    """A cluster client reads the slot map when built: no answer is StoreUnavailable, within the timeouts."""
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="no startup node"):
        connect(f"redis+cluster://127.0.0.1:{free_port()}", 0.2)
    assert time.monotonic() - started < 5  # the refused connections' time, with room for a busy machine


def test_celery_broker_for_sentinel():
    """kombu's form: one sentinel:// URL per Sentinel, joined by ';'; the service is master_name."""
    broker, options = celery_sentinel_broker("redis+sentinel://:p%40ss@s1,s2:5000/mymaster/1?sentinel_password=x")
    assert broker == "sentinel://:p%40ss@s1:26379/1;sentinel://:p%40ss@s2:5000/1"
    assert options == {"master_name": "mymaster", "sentinel_kwargs": {"password": "x"}}
    with pytest.raises(ValueError, match="not a redis\\+sentinel"):
        celery_sentinel_broker("redis+cluster://c1")
