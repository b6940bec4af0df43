"""The decision script's connections: one per thread, handed back to the pool."""

from __future__ import annotations

import contextlib
import gc
import threading

import redis

from quotas.scripts import LuaScript


def test_each_thread_keeps_one_connection_and_hands_it_back_when_it_ends(redis_client):
    script = LuaScript(redis_client, "return redis.call('INCR', KEYS[1])")
    pool = redis_client.connection_pool
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
    assert sorted(results) == list(range(1, 81))
    # Every thread's connection went back to the pool when the thread ended: nothing leaks.
    assert not pool._in_use_connections
    assert len(pool._available_connections) <= 4


def test_a_connection_closed_by_the_server_is_replaced(redis_client):
    """A held connection the server dropped (restart, proxy idle timeout) costs at most one failed call."""
    script = LuaScript(redis_client, "return 1")
    assert script(keys=[], args=[]) == 1
    redis_client.client_kill_filter(_type="normal", skipme=True)
    with contextlib.suppress(redis.ConnectionError):
        script(keys=[], args=[])
    assert script(keys=[], args=[]) == 1


def test_every_script_on_one_client_shares_the_threads_connection(redis_client):
    first = LuaScript(redis_client, "return 1")
    second = LuaScript(redis_client, "return 2")
    assert (first(keys=[], args=[]), second(keys=[], args=[])) == (1, 2)
    assert first._local.held is second._local.held
    assert len(redis_client.connection_pool._in_use_connections) == 1
