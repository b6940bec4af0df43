"""The memory store's scripts: the Lua library's own source, run in this process.

The memory store does not port the algorithms to Python: it runs the very
scripts Redis runs (:func:`quotas.contract.library.script_source`, the EVAL form)
in Lua 5.1, Redis's Lua, through ``lupa``. What those scripts need of Redis
is provided here: ``redis.call`` and ``redis.pcall`` on the
:class:`~quotas.store.backends.memory.keyspace.Keyspace`, ``struct.pack`` and
``struct.unpack`` for the formats the library uses, and Redis's conversions
between Lua values and replies. So a decision in memory is the decision
``decide.lua`` makes, by construction; the behaviour suite
(``tests/quotas/test_store_behaviour.py``) checks the seams around it.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from redis.connection import Encoder
from redis.exceptions import ResponseError

from quotas.store.backends.memory.base import Reply, Status
from quotas.store.backends.memory.keyspace import Keyspace

try:  # lupa is an extra ([memory]): a project that never uses memory:// does not need it
    from lupa import lua51
except ImportError:  # pragma: no cover - the system check quotas.E058 says what to install
    lua51 = None

#: How redis-py turns arguments into bytes: the memory client encodes them the same way.
ENCODER = Encoder("utf-8", "strict", decode_responses=False)


def lua_available() -> bool:
    """Whether ``lupa`` (with its Lua 5.1 runtime) is installed."""
    return lua51 is not None


def _to_bytes(value: Any) -> bytes:
    """A ``redis.call`` argument as Redis sees it: Lua numbers as ``%.17g`` text (integers without a point)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        raise ResponseError("ERR Lua redis lib command arguments must be strings or integers")
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, float):
        return str(int(value)).encode() if value.is_integer() else f"{value:.17g}".encode()
    if isinstance(value, str):
        return value.encode()
    raise ResponseError("ERR Lua redis lib command arguments must be strings or integers")


#: The struct formats the library uses (``SPEC_FORMAT`` and a float), translated once to Python's struct.
_STRUCT_CODES = {"<": "<", "B": "B", "d": "d"}


@lru_cache(maxsize=16)
def _struct_plan(fmt: bytes) -> tuple[str, bool]:
    """Lua struct ``fmt`` -> (Python struct format of its fixed part, whether it ends in ``c0``).

    ``c0`` is "a string whose length is the value read just before": that value is read, not returned.
    """
    text = fmt.decode()
    tail = text.endswith("c0")
    body = text[:-2] if tail else text
    try:
        return "".join(_STRUCT_CODES[c] for c in body), tail
    except KeyError:
        raise ResponseError(f"ERR struct format {text!r} is not supported by the memory store") from None


class LuaLibrary:
    """One Lua 5.1 state running the library's scripts against ``keyspace``, one script at a time."""

    def __init__(self, keyspace: Keyspace) -> None:
        if lua51 is None:
            raise ImportError("the memory store runs the Lua library with lupa: pip install lupa")
        self.keyspace = keyspace
        self.lock = threading.RLock()  # a Lua state runs one call at a time; scripts nest no other script
        self.lua = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True, register_eval=False)
        g = self.lua.globals()
        redis_table = self.lua.table_from(
            {
                b"call": self._call,
                b"pcall": self._pcall,
                b"error_reply": lambda message: self.lua.table_from({b"err": message}),
                b"status_reply": lambda message: self.lua.table_from({b"ok": message}),
                b"log": lambda *args: None,
                b"LOG_DEBUG": 0,
                b"LOG_VERBOSE": 1,
                b"LOG_NOTICE": 2,
                b"LOG_WARNING": 3,
            }
        )
        g[b"redis"] = redis_table
        g[b"struct"] = self.lua.table_from({b"pack": self._pack, b"unpack": self._unpack})
        self._compiled: dict[str, tuple[Any, str]] = {}

    # What scripts call.

    def _call(self, name: bytes, *args: Any) -> Any:
        return self._to_lua(self.keyspace.command(name, [_to_bytes(a) for a in args]))

    def _pcall(self, name: bytes, *args: Any) -> Any:
        try:
            return self._call(name, *args)
        except ResponseError as exc:
            return self.lua.table_from({b"err": str(exc).encode()})

    def _to_lua(self, reply: Reply) -> Any:
        """A reply as Redis hands it to Lua: nil bulk -> false, arrays -> tables, status -> {ok = ...}."""
        if reply is None:
            return False
        if isinstance(reply, list):
            return self.lua.table_from([self._to_lua(r) for r in reply])
        if isinstance(reply, Status):
            return self.lua.table_from({b"ok": bytes(reply)})
        return reply

    @staticmethod
    def _pack(fmt: bytes, *values: Any) -> bytes:
        plan, tail = _struct_plan(fmt)
        if tail:
            raise ResponseError("ERR struct.pack with c0 is not supported by the memory store")
        return struct.pack(plan, *values)

    @staticmethod
    def _unpack(fmt: bytes, data: bytes, pos: int = 1) -> tuple[Any, ...]:
        plan, tail = _struct_plan(fmt)
        offset = pos - 1
        values = list(struct.unpack_from(plan, data, offset))
        offset += struct.calcsize(plan)
        if tail:
            length = int(values.pop())
            values.append(data[offset : offset + length])
            offset += length
        return (*values, offset + 1)

    # Running a script.

    def run(self, source: str, keys: Sequence[Any], args: Sequence[Any]) -> Reply:
        """Run script ``source`` (an EVAL body) with ``keys`` and ``args``; returns its reply as Redis would."""
        with self.keyspace.lock, self.lock:
            found = self._compiled.get(source)
            if found is None:
                sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
                found = self._compiled[source] = (self.lua.eval(f"function(KEYS, ARGV)\n{source}\nend"), sha)
            function, sha = found
            lua_keys = self.lua.table_from([ENCODER.encode(k) for k in keys])
            lua_args = self.lua.table_from([ENCODER.encode(a) for a in args])
            try:
                result = function(lua_keys, lua_args)
            except ResponseError as exc:  # a command failed in redis.call: Redis 7 names the script
                raise ResponseError(f"{exc} script: {sha}") from exc
            except Exception as exc:  # a Lua runtime error: what Redis answers as a script error
                raise ResponseError(f"ERR Error running script: {exc}") from exc
            return self._from_lua(result)

    def _from_lua(self, value: Any) -> Reply:
        """A script's result as the reply Redis sends: numbers truncated to integers, false -> nil, tables ->
        arrays (up to the first nil), {err = ...} -> an error, {ok = ...} -> a status."""
        if value is None or value is False:
            return None
        if value is True:
            return 1
        if isinstance(value, int | float):
            return int(value)
        if isinstance(value, bytes):
            return value
        err = value[b"err"]
        if err is not None:
            raise ResponseError(err.decode("utf-8", "replace") if isinstance(err, bytes) else str(err))
        ok = value[b"ok"]
        if ok is not None:
            return ok
        out, i = [], 1
        while (item := value[i]) is not None:
            out.append(self._from_lua(item))
            i += 1
        return out
