"""The Lua scripts, assembled from the files in ``quotas/lua`` and called by SHA.

``decide.lua`` is the only script on the request path. It is assembled once
per process from the shared helpers and one small file per algorithm, and
called by :class:`LuaScript`, which sends EVALSHA and loads the source only
when the server answers NOSCRIPT (after a restart or a SCRIPT FLUSH).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import threading
import time
import weakref
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import redis
from hiredis import pack_command
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quotas.engine.protocol import lua_constants

_PARTS = {
    "decide": (
        "common.lua",
        "fixed_window.lua",
        "sliding_window_counter.lua",
        "gcra.lua",
        "period.lua",
        "sliding_window_log.lua",
        "concurrency.lua",
        "ban.lua",
        "usage.lua",
        "bucket.lua",
        "decide.lua",
    ),
    "release": ("release.lua",),
    "refund": ("common.lua", "period.lua", "refund.lua"),
    "adjust": ("common.lua", "period.lua", "usage.lua", "adjust.lua"),
    "usage_add": ("usage.lua", "usage_add.lua"),
}


@cache
def script_source(name: str) -> str:
    """The assembled source of script ``name`` ("decide" or "refund")."""
    folder = resources.files("quotas.engine") / "lua"
    parts = [folder.joinpath(part).read_text(encoding="utf-8") for part in _PARTS[name]]
    return "\n".join([lua_constants(), *parts])


#: Seconds a thread keeps the connection it took from the pool before handing it
#: back (and taking one again). Taking a connection costs about as much as
#: running the decision script; handing it back now and then keeps what the pool
#: does on checkout (a Sentinel pool asks where the primary is, see
#: quotas.engine.redis_connect.FollowingSentinelPool) happening about once a second.
HOLD_SECONDS = 1.0


class _HeldConnection:
    """One thread's connection, handed back to its pool when the thread ends."""

    __slots__ = ("conn", "pid", "pool_ref", "until")

    def __init__(self, pool: Any) -> None:
        # A weak reference: the pool's client owns the pool, not the threads that borrow from it.
        self.pool_ref = weakref.ref(pool)
        self.conn: Any = None  # a redis-py Connection while held
        self.pid, self.until = 0, 0.0

    def release(self) -> None:
        conn, self.conn = self.conn, None
        pool = self.pool_ref()
        if conn is not None and pool is not None and self.pid == os.getpid():  # a forked child leaves its parent's
            pool.release(conn)

    def __del__(self) -> None:
        # Never raise from a finalizer (it may run at interpreter shutdown).
        with contextlib.suppress(Exception):
            self.release()


# One thread-local per pool, so that every script of an engine (decide, refund,
# adjust, release) shares the thread's one held connection.
_held_by_pool: weakref.WeakKeyDictionary[Any, threading.local] = weakref.WeakKeyDictionary()
_held_lock = threading.Lock()


def _held_slot(pool: Any) -> threading.local:
    with _held_lock:
        slot = _held_by_pool.get(pool)
        if slot is None:
            slot = _held_by_pool[pool] = threading.local()
        return slot


class LuaScript:
    """A Lua script called by SHA; loaded into Redis only when it answers NOSCRIPT.

    With a plain :class:`redis.Redis` client each thread keeps one pooled
    connection (shared by all scripts on that client) for up to
    :data:`HOLD_SECONDS` and writes the packed EVALSHA to
    it directly: redis-py's generic command path (pool checkout and release,
    argument encoding, retries, callbacks) costs about as much as the decision
    script itself, and the engine handles failures on its own. Other clients
    (cluster) use redis-py's own :class:`~redis.commands.core.Script`.

    Measured (``make bench`` section 8, a no-op script, 2 cores, Redis 7.0,
    run of 2026-11-22 17:27 UTC): 39.4 us per call on the held connection
    with its poll for a closed socket, 37.7 us without the poll, 84.2 us
    through redis-py's ``register_script`` (pool checkout, Retry, callbacks).
    The held path is kept for that factor of two; the poll's 2 us buy never
    losing a request to a connection Redis closed (see :meth:`_send`).
    """

    def __init__(self, client: Any, source: str) -> None:
        self.client = client
        self.source = source
        self.sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
        self._direct = type(client) is redis.Redis
        self._script = client.register_script(source)
        self._local = _held_slot(client.connection_pool) if self._direct else threading.local()

    def _connection(self) -> _HeldConnection:
        held = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _HeldConnection(self.client.connection_pool)
        now = time.monotonic()
        if held.conn is not None and (now >= held.until or held.pid != os.getpid()):
            held.release()
        if held.conn is None:
            held.conn = self.client.connection_pool.get_connection()
            held.pid, held.until = os.getpid(), now + HOLD_SECONDS
        return held

    def __call__(self, keys: Sequence[str], args: Sequence[object]) -> Any:
        """Run the script; redis-py errors propagate (the caller maps them).

        A connection Redis closed while it sat in this thread (CLIENT KILL, a
        proxy's idle timeout, a restart) is replaced and the command sent again,
        once, but only when the command provably never reached Redis (see
        :meth:`_send`). Once it was sent, a failure to read the reply (a
        timeout, a connection lost meanwhile) is never retried: the script may
        have run, and running it again would count the request twice.
        """
        if not self._direct:
            return self._script(keys=keys, args=args)
        packed = pack_command(("EVALSHA", self.sha, len(keys), *keys, *args))  # type: ignore[arg-type]
        held = self._send(packed)
        conn = held.conn
        try:
            try:
                return conn.read_response()
            except NoScriptError:
                conn.send_command("SCRIPT", "LOAD", self.source)
                conn.read_response()
                conn.send_command("EVALSHA", self.sha, len(keys), *keys, *args)
                return conn.read_response()
        except (RedisConnectionError, RedisTimeoutError, OSError):
            # A half-read reply must never be read by the next request on this connection.
            conn.disconnect()
            held.release()
            raise

    def _send(self, packed: bytes) -> _HeldConnection:
        """Write ``packed`` on this thread's connection; returns the connection it went out on.

        How a command that never reached Redis is told apart from one that may
        have run: before writing, the idle connection is polled. Redis sends
        nothing unasked, so a readable socket means the server closed it (EOF)
        or left stray bytes: the command has not been written anywhere yet, so
        a new connection is taken and it is written there. A write that fails
        outright (reset, broken pipe) never delivered a complete command, and
        Redis runs only complete commands: it is written once more on a new
        connection. A failure on the second connection, or anything after the
        write succeeded, propagates.
        """
        for attempt in range(2):
            held = self._connection()
            conn = held.conn
            try:
                if _closed_or_dirty(conn):
                    raise RedisConnectionError("connection closed by the server while idle")
                conn.send_packed_command([packed], False)
                return held
            except (RedisConnectionError, OSError):
                conn.disconnect()
                held.release()
                if attempt:
                    raise
        raise AssertionError("unreachable")


def _closed_or_dirty(conn: Any) -> bool:
    """Whether an idle connection's socket is readable: closed by the server, or holding bytes nobody asked for.

    One poll(2) with no wait (about a microsecond), on the request path, in
    exchange for never losing a request to a connection Redis closed.
    """
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return False  # not connected yet: send_packed_command connects
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))
