"""Redis's protocol (RESP) on the request path: a decision's command as the store keeps it encoded, and the
write and the read on the socket that :class:`quotas.store.transport.LuaScript` does without redis-py's
per-command machinery.

:class:`Encoded` is a script call's KEYS or ARGV carrying its own encoding, made by the store
(:meth:`quotas.store.redis_store.RedisStore.encode`) from runs it keeps encoded, and :func:`bulk` encodes as
hiredis's packer does, so what goes on the wire is byte for byte what packing every item would send
(``tests/quotas/test_store_encoding.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

try:
    from redis._parsers.hiredis import NOT_ENOUGH_DATA, _HiredisParser
except ImportError:  # without hiredis, replies are read through redis-py
    NOT_ENOUGH_DATA = _HiredisParser = None  # type: ignore[assignment,misc]

_T = TypeVar("_T")


class Encoded(list[_T]):
    """A script call's KEYS or ARGV: a list like any other (for every client, and the memory store) that also
    carries ``resp``, its items in Redis's protocol (KEYS with their count first), which the store makes from
    parts it keeps encoded. :class:`~quotas.store.transport.LuaScript` sends those rather than packing the items
    again; None: pack them. Made as a list, then given its ``resp`` (a Python ``__init__`` cost about 3,000
    instructions, cachegrind)."""

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


# Writing the packed command and reading its reply straight on the socket, with hiredis's Reader, where redis-py
# would take six calls of its own (send_packed_command, read_response and the parser's): about 6,600 instructions
# a call, 1,400 of them the write's (cachegrind). Errors are raised as redis-py raises them, and the connection is
# dropped the same way.


def write(conn: Any, packed: list[bytes]) -> None:
    """Send ``packed`` on ``conn`` (connected first if it is not), as ``conn.send_packed_command`` does."""
    sock = conn._sock
    if sock is None:
        conn.send_packed_command(packed, False)  # connects
        return
    try:
        for chunk in packed:
            sock.sendall(chunk)
    except TimeoutError as exc:
        conn.disconnect()
        raise RedisTimeoutError("Timeout writing to socket") from exc
    except OSError as exc:
        conn.disconnect()
        raise RedisConnectionError(f"Error while writing to socket: {exc.args}") from exc
    except BaseException:  # a partial write must never be followed by another command on this connection
        conn.disconnect()
        raise


def reply(conn: Any) -> Any:
    """The reply to the command just written on ``conn``, as ``conn.read_response()`` returns it (an error reply
    raised). Read directly from the socket with hiredis's Reader; through redis-py without it."""
    parser = getattr(conn, "_parser", None)
    if type(parser) is not _HiredisParser or parser._reader is None or parser._sock is None:
        return conn.read_response()  # redis-py raises its own error for a closed connection
    answer = _read(conn, parser)
    if conn.health_check_interval:
        conn.next_health_check = time.monotonic() + conn.health_check_interval
    if isinstance(answer, list) and answer and isinstance(answer[0], RedisConnectionError):
        answer = answer[0]
    if isinstance(answer, (RedisConnectionError, ResponseError)):
        try:
            raise answer
        finally:
            del answer  # as redis-py does: the error held by this frame, which its traceback holds, is a cycle
    return answer


def _read(conn: Any, parser: Any) -> Any:
    """Feed ``parser``'s Reader from its socket until it holds a reply; a push (RESP3) before it goes to redis-py's
    handlers, as its parser hands it over. A failure drops ``conn`` as redis-py does."""
    reader, sock, buffer = parser._reader, parser._sock, parser._buffer
    push = getattr(parser, "_hiredis_PushNotificationType", None)  # redis-py 6+ (RESP3 pushes); 5.x has none
    try:
        while True:
            answer = reader.gets()
            while answer is NOT_ENOUGH_DATA:
                size = sock.recv_into(buffer)
                if not size:
                    raise RedisConnectionError("Connection closed by server.")
                reader.feed(buffer, 0, size)
                answer = reader.gets()
            if push is None or not isinstance(answer, push):
                return answer
            parser.handle_push_response(answer)
    except TimeoutError as exc:
        conn.disconnect()
        raise RedisTimeoutError(f"Timeout reading from {conn._host_error()}") from exc
    except OSError as exc:
        conn.disconnect()
        raise RedisConnectionError(f"Error while reading from {conn._host_error()} : {exc.args}") from exc
    except BaseException:  # a half-read reply must never be read by the next command
        conn.disconnect()
        raise
