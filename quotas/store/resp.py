"""Redis's protocol (RESP) as the store sends it: a script call's KEYS and ARGV kept encoded (:class:`Encoded`,
:func:`bulk`), and a command packed by hiredis's packer where it is installed (:func:`pack`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

try:
    from hiredis import pack_command
except ImportError:  # hiredis is recommended, not required: redis-py's own packer then
    pack_command = None  # type: ignore[assignment]  # "no hiredis"
#: hiredis's packer, typed for what the store sends (str, bytes, int, float), or None without hiredis.
_pack_with_hiredis: Callable[[Any], bytes] | None = pack_command

_T = TypeVar("_T")


class Encoded(list[_T]):
    """A script call's KEYS or ARGV: a list like any other (for every client, and the memory store) that also
    carries ``resp``, its items in Redis's protocol (KEYS with their count first), which the store makes from
    parts it keeps encoded. The transport (:class:`quotas.store.transport.LuaScript`) sends those rather than
    packing the items again; None: pack them. Made as a list, then given its ``resp`` (no ``__init__`` of its
    own: one call less on the hot path)."""

    __slots__ = ("resp",)
    resp: bytes | None


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


def pack(conn: Any, command: tuple[object, ...]) -> Any:
    """``command`` in Redis's protocol: hiredis's packer called directly when hiredis is installed, else
    redis-py's. The bytes are the same (hiredis encodes str as UTF-8 and a float by its repr, as redis-py's
    encoder does); redis-py's own path with hiredis first copies every argument through a generator (its cost
    in docs/benchmark-history.md). A type hiredis refuses goes through redis-py, whose DataError names it."""
    if _pack_with_hiredis is not None:
        try:  # not contextlib.suppress: a context manager costs a call more on the hot path
            return [_pack_with_hiredis(command)]
        except TypeError:
            pass
    return conn.pack_command(*command)
