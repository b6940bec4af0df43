"""Calling the Lua library's entry points (``quotas.contract.library``) from Python.

``decide`` is the only call on the request path. :class:`LuaScript` sends it
as FCALL where the server has functions (Redis 7+) and as EVALSHA where it
does not (Redis 6.2), loading the library or the script only when the server
answers that it lacks it (after a restart, a FUNCTION FLUSH or SCRIPT FLUSH,
a failover). Those answers mean nothing ran, so the call is simply sent again.
A call whose KEYS and ARGV come encoded (:class:`~quotas.store.resp.Encoded`, from runs the store keeps in
Redis's protocol) is sent as it is, byte for byte what packing every item would send
(``tests/quotas/test_store_encoding.py``), through redis-py's public ``Connection.send_packed_command``, and
its reply read by ``Connection.read_response``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis
from asgiref.sync import sync_to_async
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from quotas.contract.library import function_name, library_source, script_source
from quotas.store.resp import Encoded, pack

logger = logging.getLogger(__name__)

# Here, where commands are written, rather than in quotas.store.resp: the store calls it on every decision that asks
# Redis (its client's run), and a cold decision then enters one module less.
#: An empty bulk string, the most common item of all.
_EMPTY = b"$0\r\n\r\n"


def bulk(items: Iterable[Any]) -> bytes:
    """``items`` (str, bytes, int or float) as Redis's protocol's bulk strings, as hiredis's packer writes them
    (str as UTF-8, a float by its repr); raises TypeError for another type."""
    out = []
    for item in items:
        kind = type(item)
        if kind is str:
            if not item:
                out.append(_EMPTY)
                continue
            raw = item.encode()
        elif kind is bytes:
            raw = item
        elif kind is int:
            raw = b"%d" % item
        elif kind is float:
            raw = repr(item).encode()
        else:
            raise TypeError(f"cannot send a {kind.__name__} to Redis")
        out.append(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(out)


def bulk_pair(first: str, second: str) -> bytes:
    """Two str as :func:`bulk` writes them, in one format rather than its loop: a client's run of the ARGV and a
    bucket's two keys, on every decision that asks Redis (encode: 500 less, 7,000 where the bucket is new)."""
    one, two = first.encode(), second.encode()
    return b"$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(one), one, len(two), two)


#: What to do about an error reply that proves the call never ran (see :func:`remedy`).
LOAD_LIBRARY, USE_EVAL, LOAD_SCRIPT = "load-library", "use-eval", "load-script"


def remedy(exc: ResponseError, functions: bool) -> str | None:
    """How to recover from ``exc``, the reply to a call sent as FCALL (``functions``) or EVALSHA; None: a real error.

    * FCALL, "Function not found": the server lost the library; load it.
    * FCALL, unknown command (Redis 6.2) or NOPERM (an ACL user without FCALL):
      call by EVALSHA from now on.
    * EVALSHA, NOSCRIPT: load the script.
    """
    message = str(exc)
    if not functions:
        return LOAD_SCRIPT if isinstance(exc, NoScriptError) else None
    if message.startswith("Function not found"):
        return LOAD_LIBRARY
    if message.startswith("unknown command") or message.startswith("NOPERM"):
        return USE_EVAL
    return None


#: Seconds a thread keeps the connection it took from the pool before handing it
#: back (and taking one again). Taking a connection costs about as much as
#: running the decision script; handing it back now and then keeps what the pool
#: does on checkout (a Sentinel pool asks where the primary is, see
#: quotas.store.backends.connect.FollowingSentinelPool) happening about once a second.
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


# One thread-local per pool, so that every entry point on a client (decide, refund,
# adjust, release) shares the thread's one held connection.
_held_by_pool: weakref.WeakKeyDictionary[Any, threading.local] = weakref.WeakKeyDictionary()


def _held_slot(pool: Any) -> threading.local:
    # setdefault (one dict operation) rather than a lock: two threads get the same slot, and no lock is left
    # held in a child forked while a parent's thread made one.
    slot = _held_by_pool.get(pool)
    return slot if slot is not None else _held_by_pool.setdefault(pool, threading.local())


class LuaScript:
    """One entry point of the Lua library, called by FCALL, or by EVALSHA where the server has no functions.

    The first call is sent as FCALL. A server without functions (Redis 6.2,
    or an ACL user not allowed FCALL) makes this object call by EVALSHA from
    then on; a server that lost the library gets it loaded again (FUNCTION
    LOAD REPLACE, which only ever replaces the library with itself: its name
    carries a hash of its code). See :func:`remedy`.

    With a plain :class:`redis.Redis` client each thread keeps one pooled
    connection (shared by all scripts on that client) for up to
    :data:`HOLD_SECONDS` and sends the packed call on it with the connection's
    own ``send_packed_command`` and ``read_response``: redis-py's generic
    command path (pool checkout and release, argument encoding, retries,
    callbacks) costs about as much as the decision itself, and the store and
    its guard handle failures on their own. Other clients (cluster) use
    redis-py's ``fcall`` and its own :class:`~redis.commands.core.Script`.

    The held path is kept because a call on it costs half of one through
    redis-py's ``register_script`` (figures in docs/benchmark-history.md); its
    check for a closed connection (``Connection.can_read``) buys never losing
    a request to a connection Redis closed (see :meth:`_send`).
    """

    def __init__(self, client: Any, source: str, function: str | None = None, library: str | None = None) -> None:
        self._client = client
        self.source = source
        self.sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
        self.function = function
        self.library = library
        #: Whether calls go out as FCALL; False without a function, or once the server showed it cannot run one.
        self.functions = function is not None
        self._direct = type(client) is redis.Redis
        self._script = client.register_script(source)
        # The start of each form of the command (FCALL's only with a function), in Redis's protocol (see _resp).
        self._heads = {False: bulk(("EVALSHA", self.sha))}
        if function is not None:
            self._heads[True] = bulk(("FCALL", function))
        self._local = _held_slot(client.connection_pool) if self._direct else threading.local()

    @classmethod
    def entry(cls, client: Any, name: str) -> LuaScript:
        """The library's entry point ``name`` ("decide", "refund", ...) on ``client``."""
        return cls(client, script_source(name), function_name(name), library_source())

    def command(
        self, keys: Sequence[object], args: Sequence[object], functions: bool | None = None
    ) -> tuple[object, ...]:
        """The command that calls this entry point with ``keys`` and ``args`` (FCALL, or EVALSHA; ``functions``
        defaults to how calls go out now)."""
        if self.functions if functions is None else functions:
            return ("FCALL", self.function, len(keys), *keys, *args)
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

    def __call__(self, keys: Sequence[str], args: Sequence[object]) -> Any:
        """Run the entry point; redis-py errors propagate (the caller maps them).

        A connection Redis closed while it sat in this thread (CLIENT KILL, a
        proxy's idle timeout, a restart) is replaced and the command sent again,
        once, but only when the command provably never reached Redis (see
        :meth:`_send`). Once it was sent, a failure to read the reply (a
        timeout, a connection lost meanwhile) is never retried: the call may
        have run, and running it again would count the request twice.
        """
        if not self._direct:
            return self._call_generic(keys, args)
        # The form this call goes out in: another thread may switch the entry point to EVALSHA meanwhile, and
        # this call's "unknown command" must still be read as a reply to FCALL (8 threads' first calls on
        # Redis 6.2 all failed but one before).
        functions = self.functions
        held = self._send(keys, args, functions)
        conn = held.conn
        try:
            try:
                return conn.read_response()
            except ResponseError as exc:
                fix = remedy(exc, functions)
                if fix is None:
                    raise
                self._apply(fix, lambda *command: _ask(conn, command))
                conn.send_packed_command(pack(conn, self.command(keys, args)), False)
                return conn.read_response()
        except (RedisConnectionError, RedisTimeoutError, OSError):
            # redis-py dropped the connection (a half-read reply must never be read by the next request on it).
            held.release()
            raise

    def _call_generic(self, keys: Sequence[str], args: Sequence[object]) -> Any:
        for attempt in range(2):
            functions = self.functions  # as in __call__: the form this attempt goes out in
            try:
                if functions:
                    return self._client.fcall(self.function, len(keys), *keys, *args)
                return self._script(keys=keys, args=args)  # redis-py's Script loads itself on NOSCRIPT
            except ResponseError as exc:
                fix = remedy(exc, functions)
                if fix is None or attempt:
                    raise
                self._apply(fix, self._client.execute_command)
        raise AssertionError("unreachable")

    def _apply(self, fix: str, ask: Any) -> None:
        """Load what the server lacks, or switch to EVALSHA (``ask`` sends one command and returns its reply)."""
        if fix == LOAD_LIBRARY:
            try:
                ask("FUNCTION", "LOAD", "REPLACE", self.library)
                return
            except ResponseError as exc:  # e.g. NOPERM: an ACL user may call scripts but not load functions
                logger.warning("quotas: cannot load the Lua function library (%s); calling by EVALSHA", exc)
            fix = USE_EVAL
        if fix == USE_EVAL:
            logger.info("quotas: Redis runs no functions for this client; calling %s by EVALSHA", self.function)
            self.functions = False
        if self._direct:  # redis-py's Script (the other clients) loads itself on NOSCRIPT
            ask("SCRIPT", "LOAD", self.source)

    def _send(self, keys: Sequence[str], args: Sequence[object], functions: bool) -> _HeldConnection:
        """Send the command (see :meth:`command`) on this thread's connection; returns the connection it went out
        on.

        How a command that never reached Redis is told apart from one that may
        have run: before sending, the idle connection is asked whether it has
        anything to read (``can_read``). Redis sends nothing unasked, so a
        readable connection, or one found closed (EOF), was closed by the
        server or holds stray bytes: the command has not been sent anywhere
        yet, so a new connection is taken and it goes out there. A write that
        fails outright (reset, broken pipe: redis-py's ConnectionError) never
        delivered a complete command, and Redis runs only complete commands:
        it is sent once more on a new connection. A failure on the second
        connection, a write that timed out, or anything after the write
        succeeded, propagates."""
        # The command from the encodings keys and args carry (Encoded), rather than every item packed again
        # (figures in docs/benchmark-history.md).
        packed = None
        if type(keys) is Encoded and type(args) is Encoded and keys.resp is not None and args.resp is not None:
            head = b"*%d\r\n" % (3 + len(keys) + len(args))
            packed = [b"".join((head, self._heads[functions], keys.resp, args.resp))]
        for attempt in range(2):
            # This thread's connection, taken from the pool for up to HOLD_SECONDS.
            held = getattr(self._local, "held", None)
            if held is None:
                held = self._local.held = _HeldConnection(self._client.connection_pool)
            now = time.monotonic()
            if held.conn is not None and (now >= held.until or held.pid != os.getpid()):
                held.release()
            if held.conn is None:
                held.conn = self._client.connection_pool.get_connection()
                held.pid, held.until = os.getpid(), now + HOLD_SECONDS
            conn = held.conn
            try:
                command = packed if packed is not None else pack(conn, self.command(keys, args, functions))
                # Connects first if it is not connected; raises ConnectionError for one the server closed.
                if conn.can_read():  # bytes nobody asked for
                    raise RedisConnectionError("connection holding unread bytes while idle")
                conn.send_packed_command(command, check_health=False)  # redis-py drops it on any failure
                return held
            except RedisConnectionError:
                conn.disconnect()
                held.release()
                if attempt:
                    raise
        raise AssertionError("unreachable")


class AsyncLuaScript:
    """:class:`LuaScript` for redis-py's asyncio client: FCALL, or EVALSHA, with the same remedies (:func:`remedy`)."""

    def __init__(self, client: Any, entry: str) -> None:
        self._client = client
        self.entry = entry
        self.function = function_name(entry)
        self.functions = True
        self._script = client.register_script(script_source(entry))

    async def __call__(self, keys: Sequence[str], args: Sequence[object]) -> Any:
        """Run the entry point; redis-py errors propagate."""
        for attempt in range(2):
            functions = self.functions  # as in LuaScript.__call__: the form this attempt goes out in
            try:
                if functions:
                    return await self._client.fcall(self.function, len(keys), *keys, *args)
                return await self._script(keys=keys, args=args)  # loads itself on NOSCRIPT
            except ResponseError as exc:
                fix = remedy(exc, functions)
                if fix is None or attempt:
                    raise
                if fix == LOAD_LIBRARY:
                    try:
                        await self._client.function_load(library_source(), replace=True)
                        continue
                    except ResponseError as load_exc:
                        logger.warning(
                            "quotas: cannot load the Lua function library (%s); calling by EVALSHA", load_exc
                        )
                self.functions = False
        raise AssertionError("unreachable")


def _ask(conn: Any, command: tuple[object, ...]) -> Any:
    """Send ``command`` on ``conn`` and read its reply (errors raise)."""
    conn.send_command(*command)
    return conn.read_response()


#: The library's entry points the store calls.
ENTRIES = ("decide", "refund", "adjust", "release")


class Transport:
    """How the store reaches Redis: each entry point of the Lua library on one client, sync and async.

    :meth:`call` sends on ``client`` through :class:`LuaScript`. :meth:`acall`
    awaits redis-py's asyncio client, one per event loop (asyncio connections
    belong to one loop; an ASGI server runs one loop per process), made by
    ``async_client``. Without one (Sentinel, Cluster) the sync call runs in a
    worker thread: correct, only not thread-free.
    """

    def __init__(self, client: Any, async_client: Callable[[], Any] | None = None) -> None:
        self._client = client
        self._scripts = {name: LuaScript.entry(client, name) for name in ENTRIES}
        self._async_client = async_client
        # Per event loop: its client and the entry points on it.
        self._loops: weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, AsyncLuaScript]]] = weakref.WeakKeyDictionary()

    def call(self, entry: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        """Run the library's ``entry`` with ``keys`` and ``args``; redis-py errors propagate."""
        return self._scripts[entry](keys, args)

    async def acall(self, entry: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        """:meth:`call`, awaited on this event loop's client."""
        script = self.async_script(entry)
        if script is None:
            return await sync_to_async(self.call, thread_sensitive=False)(entry, keys, args)
        return await script(keys, args)

    def script(self, entry: str) -> LuaScript:
        """The sync entry point ``entry`` (whether it calls by FCALL: :attr:`LuaScript.functions`)."""
        return self._scripts[entry]

    def async_script(self, entry: str) -> AsyncLuaScript | None:
        """The entry point ``entry`` on this event loop's client (made on first use), or None without one."""
        if self._async_client is None:
            return None
        loop = asyncio.get_running_loop()
        found = self._loops.get(loop)
        if found is None:
            client = self._async_client()
            found = self._loops[loop] = (client, {name: AsyncLuaScript(client, name) for name in ENTRIES})
        return found[1][entry]

    async def aclose(self) -> None:
        """Close this event loop's client (before the loop ends: in tests, or at ASGI shutdown)."""
        found = self._loops.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found[0].aclose()

    def close(self) -> None:
        """Drop the sync client's connections (an asyncio client's close when it is collected)."""
        self._client.close()
