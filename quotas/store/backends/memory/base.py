"""The memory store's keyspace, in general: dispatch, the lock, expiry, and the commands on any key and strings.

Keys hold strings, hashes, sorted sets or lists, with millisecond expiry read
from an injectable clock. :meth:`KeyspaceBase.command` runs one command as
Redis would (arguments and replies in RESP2's shapes: ``bytes``, ``int``,
``None``, lists, :class:`Status`, or a raised
:class:`redis.exceptions.ResponseError`). Both the Lua library's ``redis.call``
(:mod:`quotas.store.backends.memory.lua`) and the Python client
(:mod:`quotas.store.backends.memory.client`) call it, so the two cannot see different
data. Only the commands the product sends are implemented; any other answers
"unknown command", as an old server would.

Every command and every script runs under one lock, as Redis runs one at a
time: a decision's windows are decided all or nothing here too.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from redis.exceptions import ResponseError

Reply = Any  # bytes | int | None | list[Reply] | ResponseError

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


class Status(bytes):
    """A status reply ("+OK"), told apart from a bulk string that happens to read "OK" (Lua sees a table)."""


OK = Status(b"OK")


def text(value: bytes) -> str:
    """An argument as text (for options and messages)."""
    return value.decode("utf-8", "replace")


def integer(value: bytes) -> int:
    """An integer argument, or the error Redis answers."""
    try:
        return int(value)
    except ValueError:
        raise ResponseError("ERR value is not an integer or out of range") from None


def number(value: bytes) -> float:
    """A float argument (a score, a bound), ``inf`` included, or the error Redis answers."""
    word = text(value).lower()
    if word in ("+inf", "inf"):
        return math.inf
    if word == "-inf":
        return -math.inf
    try:
        parsed = float(word)
    except ValueError:
        raise ResponseError("ERR value is not a valid float") from None
    if math.isnan(parsed):
        raise ResponseError("ERR value is not a valid float")
    return parsed


@lru_cache(maxsize=256)
def glob(pattern: bytes) -> re.Pattern[bytes]:
    """Redis's glob-style ``pattern`` (``*``, ``?``, ``[...]``, ``\\`` escapes) as a regular expression."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1 : i + 2]))
            i += 2
            continue
        if c == b"*":
            out.append(b".*")
        elif c == b"?":
            out.append(b".")
        elif c == b"[":
            end = pattern.find(b"]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith(b"^")
                body = body[1:] if negate else body
                out.append(b"[" + (b"^" if negate else b"") + body.replace(b"\\", b"\\\\") + b"]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile(b"".join(out) + b"\\Z", re.DOTALL)


#: The fewest commands between two sweeps of expired keys (:meth:`KeyspaceBase.sweep`).
SWEEP_EVERY = 1000


class KeyspaceBase:
    """One in-process keyspace (a Redis database): what every kind of value shares, and strings.

    A key is removed when it is read after its expiry, and by a sweep of every key with an expiry, run once
    the keyspace has answered as many commands as there are such keys (at least :data:`SWEEP_EVERY`): a key
    never read again (a one-off client's counters) goes at the latest then, and a sweep costs each command
    O(1) amortised, as Redis's own active expiry bounds its work.
    """

    #: What TYPE answers for each kind of value (a subclass adds its own kinds).
    TYPE_NAMES: dict[type, str] = {bytes: "string", dict: "hash", list: "list"}

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}  # key -> expiry, ms since 1970
        self.commands_since_sweep = 0
        self._handlers: dict[str, Callable[[Sequence[bytes]], Reply]] = {
            name[4:].upper(): getattr(self, name) for name in dir(self) if name.startswith("cmd_")
        }

    # Running commands.

    def command(self, name: str | bytes, args: Sequence[bytes]) -> Reply:
        """Run command ``name`` with ``args``; returns its reply, or raises :class:`ResponseError`."""
        key = (name.decode() if isinstance(name, bytes) else name).upper()
        handler = self._handlers.get(key)
        if handler is None:
            raise ResponseError(f"ERR unknown command '{key}'")
        with self.lock:
            self.commands_since_sweep += 1
            if self.commands_since_sweep >= max(SWEEP_EVERY, len(self.expires)):
                self.sweep()
            return handler(args)

    def sweep(self) -> int:
        """Remove every expired key now; returns how many went. (Called every so many commands, see the class.)"""
        with self.lock:
            self.commands_since_sweep = 0
            now = self.now_ms()
            expired = [key for key, until in self.expires.items() if until <= now]
            for key in expired:
                self.data.pop(key, None)
                del self.expires[key]
            return len(expired)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _live(self, key: bytes) -> Any:
        """The value of ``key``, or None when it is missing or has expired (which deletes it)."""
        until = self.expires.get(key)
        if until is not None and until <= self.now_ms():
            self.data.pop(key, None)
            del self.expires[key]
            return None
        return self.data.get(key)

    def _typed(self, key: bytes, kind: type, create: bool = False) -> Any:
        value = self._live(key)
        if value is None:
            if not create:
                return None
            value = self.data[key] = kind()
        elif not isinstance(value, kind):
            raise ResponseError(WRONGTYPE)
        return value

    def _delete(self, key: bytes) -> bool:
        found = self._live(key) is not None
        self.data.pop(key, None)
        self.expires.pop(key, None)
        return found

    def _drop_if_empty(self, key: bytes, value: Any) -> None:
        if not value:
            self._delete(key)

    def keys(self) -> list[bytes]:
        """Every live key."""
        return [k for k in list(self.data) if self._live(k) is not None]

    # Server.

    def cmd_ping(self, args: Sequence[bytes]) -> Reply:
        return args[0] if args else Status(b"PONG")

    def cmd_time(self, args: Sequence[bytes]) -> Reply:
        micros = int(self.clock() * 1_000_000)
        return [str(micros // 1_000_000).encode(), str(micros % 1_000_000).encode()]

    def cmd_flushall(self, args: Sequence[bytes]) -> Reply:
        self.data.clear()
        self.expires.clear()
        return OK

    def cmd_scan(self, args: Sequence[bytes]) -> Reply:
        # One pass answers everything (cursor 0 back): SCAN may return any number of keys per call.
        options = {text(args[i]).upper(): args[i + 1] for i in range(1, len(args) - 1, 2)}
        pattern = glob(options["MATCH"]) if "MATCH" in options else None
        kind = text(options["TYPE"]).lower() if "TYPE" in options else None
        found = [
            k for k in self.keys() if (pattern is None or pattern.match(k)) and (kind is None or self._type(k) == kind)
        ]
        return [b"0", found]

    def cmd_keys(self, args: Sequence[bytes]) -> Reply:
        pattern = glob(args[0])
        return [k for k in self.keys() if pattern.match(k)]

    def _type(self, key: bytes) -> str:
        value = self._live(key)
        if value is None:
            return "none"
        return self.TYPE_NAMES[type(value)]

    def cmd_type(self, args: Sequence[bytes]) -> Reply:
        return Status(self._type(args[0]).encode())

    # Keys and expiry.

    def cmd_del(self, args: Sequence[bytes]) -> Reply:
        return sum(self._delete(k) for k in args)

    cmd_unlink = cmd_del

    def cmd_exists(self, args: Sequence[bytes]) -> Reply:
        return sum(self._live(k) is not None for k in args)

    def _expire_at(self, key: bytes, at_ms: int) -> int:
        if self._live(key) is None:
            return 0
        if at_ms <= self.now_ms():
            self._delete(key)
        else:
            self.expires[key] = at_ms
        return 1

    def cmd_pexpireat(self, args: Sequence[bytes]) -> Reply:
        return self._expire_at(args[0], integer(args[1]))

    def cmd_expireat(self, args: Sequence[bytes]) -> Reply:
        return self._expire_at(args[0], integer(args[1]) * 1000)

    def cmd_pexpire(self, args: Sequence[bytes]) -> Reply:
        return self._expire_at(args[0], self.now_ms() + integer(args[1]))

    def cmd_expire(self, args: Sequence[bytes]) -> Reply:
        return self._expire_at(args[0], self.now_ms() + integer(args[1]) * 1000)

    def cmd_pttl(self, args: Sequence[bytes]) -> Reply:
        if self._live(args[0]) is None:
            return -2
        until = self.expires.get(args[0])
        return -1 if until is None else until - self.now_ms()

    def cmd_ttl(self, args: Sequence[bytes]) -> Reply:
        ms = self.cmd_pttl(args)
        return ms if ms < 0 else (ms + 500) // 1000

    def cmd_persist(self, args: Sequence[bytes]) -> Reply:
        return int(self._live(args[0]) is not None and self.expires.pop(args[0], None) is not None)

    # Strings.

    def cmd_get(self, args: Sequence[bytes]) -> Reply:
        return self._typed(args[0], bytes)

    def cmd_mget(self, args: Sequence[bytes]) -> Reply:
        return [v if isinstance(v := self._live(k), bytes) else None for k in args]

    def cmd_mset(self, args: Sequence[bytes]) -> Reply:
        if not args or len(args) % 2:
            raise ResponseError("ERR wrong number of arguments for 'mset' command")
        for i in range(0, len(args), 2):
            self.data[args[i]] = bytes(args[i + 1])
            self.expires.pop(args[i], None)
        return OK

    def _set_options(self, args: Sequence[bytes]) -> tuple[int | None, set[str]]:
        """SET's options after the value: (expiry in ms since 1970 or None, the flags NX XX KEEPTTL GET)."""
        expiry: int | None = None
        flags: set[str] = set()
        i = 0
        while i < len(args):
            option = text(args[i]).upper()
            if option in ("EX", "PX", "EXAT", "PXAT") and i + 1 < len(args):
                amount = integer(args[i + 1])
                scale = 1000 if option in ("EX", "EXAT") else 1
                expiry = amount * scale + (self.now_ms() if option in ("EX", "PX") else 0)
                i += 2
            elif option in ("NX", "XX", "KEEPTTL", "GET"):
                flags.add(option)
                i += 1
            else:
                raise ResponseError("ERR syntax error")
        return expiry, flags

    def cmd_set(self, args: Sequence[bytes]) -> Reply:
        key, value = args[0], args[1]
        expiry, flags = self._set_options(args[2:])
        get = "GET" in flags
        current = self._live(key)
        if get and current is not None and not isinstance(current, bytes):
            raise ResponseError(WRONGTYPE)
        if ("NX" in flags and current is not None) or ("XX" in flags and current is None):
            return current if get else None
        self.data[key] = bytes(value)
        if expiry is not None:
            self.expires[key] = expiry
        elif "KEEPTTL" not in flags:
            self.expires.pop(key, None)
        return current if get else OK

    def cmd_incrby(self, args: Sequence[bytes]) -> Reply:
        current = self._typed(args[0], bytes)
        value = (integer(current) if current is not None else 0) + integer(args[1])
        self.data[args[0]] = str(value).encode()
        return value
