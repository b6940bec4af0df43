"""Section 8: what one script call costs through each connection path (quotas/store/transport.py).

The engine writes the packed EVALSHA on a connection its thread holds, after
one poll(2) that tells whether Redis closed it meanwhile. The alternative is
redis-py's own path (pool checkout and release, Retry, callbacks) through
``register_script``. Each is timed on a script that does nothing, so the
difference is the client side alone.
"""

from __future__ import annotations

import select
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis

from quotas.store import transport

_NOOP = "return 1"


def _median_us(call: Callable[[], Any], calls: int, rounds: int = 5) -> float:
    for _ in range(calls // 10):
        call()
    medians = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        medians.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(medians)


def run(redis_url: str, calls: int = 20_000) -> dict[str, float]:
    """Median microseconds per call: the engine's held connection (its poll included), the poll alone, and
    redis-py's Script."""
    client = redis.Redis.from_url(redis_url)
    try:
        held = transport.LuaScript(client, _NOOP)
        generic = client.register_script(_NOOP)
        with_poll = _median_us(lambda: held(keys=[], args=[]), calls)
        # The poll as _send makes it, on a connection of its own: what the guard against a closed socket costs.
        conn = client.connection_pool.get_connection()
        try:
            conn.connect()
            poller = select.poll()
            poller.register(conn._sock, select.POLLIN | select.POLLPRI)
            poll = _median_us(lambda: poller.poll(0), calls)
        finally:
            client.connection_pool.release(conn)
        redis_py = _median_us(lambda: generic(keys=[], args=[]), calls)
    finally:
        client.close()
    return {"held_with_poll_us": with_poll, "poll_us": poll, "redis_py_script_us": redis_py}
