"""The Lua calls' connections: one per thread, handed back to the pool."""

from __future__ import annotations

import gc
import threading

import pytest
import redis
from asgiref.sync import async_to_sync

from quotas.django.respond import rate_rule
from quotas.engine import default_engine
from quotas.settings import quota_settings
from quotas.store.backends.connect import MAX_CONNECTIONS, async_connector, connect
from quotas.store.decision import DecideCall
from quotas.store.transport import LuaScript
from tests.waiting import wait_until

#: A real server's connections (CLIENT LIST, closed sockets).
pytestmark = pytest.mark.redis


def test_each_thread_keeps_one_connection_and_hands_it_back_when_it_ends(redis_server):
    """Four threads fit a pool of four connections, and when they have ended all four are free again."""
    client = redis.Redis.from_url(redis_server.url, max_connections=4)
    script = LuaScript(client, "return redis.call('INCR', KEYS[1])")
    results: list[int] = []

    def work() -> None:
        for _ in range(20):
            results.append(script(keys=["n"], args=[]))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert sorted(results) == list(range(1, 81))  # a fifth connection would have been refused
    # Every thread's connection went back to the pool when the thread ended: nothing leaks.
    pool = client.connection_pool
    taken = [pool.get_connection() for _ in range(4)]
    for connection in taken:
        pool.release(connection)
    client.close()


def test_a_connection_closed_by_the_server_is_replaced_without_a_failed_call(redis_client):
    """A held connection the server dropped (CLIENT KILL, a proxy's idle timeout) costs no call at all.

    The command had not been sent: it goes out on a new connection, once.
    """
    script = LuaScript(redis_client, "return redis.call('INCR', KEYS[1])")
    assert script(keys=["n"], args=[]) == 1
    for expected in (2, 3, 4):
        redis_client.client_kill_filter(_type="normal", skipme=True)
        assert script(keys=["n"], args=[]) == expected  # counted exactly once each time


@pytest.mark.slow  # waits 0.4 s for a script busy on the Redis server, whose clock no test moves
def test_a_timeout_after_the_command_was_sent_is_not_retried(redis_server, redis_client):
    """The script ran, but its reply came too late: a second try would count the request twice."""
    slow = redis.Redis.from_url(redis_server.url, socket_timeout=0.2)
    script = LuaScript(
        slow,
        """
        local n = redis.call('INCR', KEYS[1])
        if ARGV[1] == 'slow' then  -- busy for 0.4 s: longer than the client waits
          local t = redis.call('TIME')
          local until_us = t[1] * 1000000 + t[2] + 400000
          repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= until_us
        end
        return n
        """,
    )
    assert script(keys=["n"], args=["fast"]) == 1
    with pytest.raises(redis.TimeoutError):
        script(keys=["n"], args=["slow"])
    assert wait_until(lambda: redis_client.get("n") == b"2", 2)  # it ran once (a copy sent again would come after)
    assert script(keys=["n"], args=["fast"]) == 3


def test_every_script_on_one_client_shares_the_threads_connection(redis_server, redis_client):
    """Two scripts called by one thread go out on one connection: the server sees a single client."""
    client = redis.Redis.from_url(redis_server.url, client_name="two-scripts")
    first = LuaScript(client, "return 1")
    second = LuaScript(client, "return 2")
    assert (first(keys=[], args=[]), second(keys=[], args=[])) == (1, 2)
    assert [c["name"] for c in redis_client.client_list()].count("two-scripts") == 1
    client.close()


def test_the_asyncio_client_has_the_same_connection_cap_as_the_engines_pool(runtime, redis_client):
    """The clients async views decide with (real ones, on the test Redis, made by the connector the store's
    transport is given) cap their pool as the sync clients do."""
    window = rate_rule("capped", "5/min", "fixed_window").windows[0]
    url = str(quota_settings.REDIS_URL)

    async def decide_and_read_the_cap() -> int:
        decision = await runtime.guard.adecide(DecideCall("{ip.192.0.2.9}", [window]))
        assert decision.allowed  # an asyncio client was used for a real decision, not only built
        await default_engine.runtime().store.transport.aclose()
        make = async_connector(url, 1.0)
        assert make is not None  # one server: asyncio clients of its own
        client = make()
        cap = client.connection_pool.max_connections
        await client.aclose()
        return cap

    assert async_to_sync(decide_and_read_the_cap)() == MAX_CONNECTIONS
    assert connect(url, 1.0).connection_pool.max_connections == MAX_CONNECTIONS


def test_a_call_reaches_redis_as_redis_py_would_have_written_it(redis_server):
    """The held path packs a call itself (hiredis's packer, without redis-py's per-command copy): text (UTF-8),
    bytes, ints, floats (by repr) and empty strings arrive in Redis as redis-py writes them, and a value no
    packer can write is redis-py's DataError, raised before anything is sent (the connection stays usable)."""
    client = redis.Redis.from_url(redis_server.url)
    script = LuaScript(client, "return ARGV")
    args: list[object] = ["é", b"\x00spec", 7, -3, 0.1, 1 / 3, 1e20, ""]
    assert script(keys=[], args=args) == [b"\xc3\xa9", b"\x00spec", b"7", b"-3", b"0.1", b"0.3333333333333333",
                                          b"1e+20", b""]  # fmt: skip
    with pytest.raises(redis.DataError):
        script(keys=[], args=[None])
    assert script(keys=[], args=["still usable"]) == [b"still usable"]
