"""Redis's protocol (RESP) as the store sends it: a script call's KEYS and ARGV kept encoded (:class:`Encoded`,
their items written by :func:`quotas.store.transport.bulk`), and a command packed by hiredis's packer where it is
installed (:func:`pack`).
"""

from __future__ import annotations

from collections.abc import Callable
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
