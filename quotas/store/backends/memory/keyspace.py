"""The memory store's keyspace: :class:`KeyspaceBase` with the hash, sorted-set and list commands."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from redis.exceptions import ResponseError

from quotas.store.backends.memory.base import OK, KeyspaceBase, Reply, glob, integer, number, text


class SortedSet:
    """Members ordered by (score, member), as Redis orders them."""

    __slots__ = ("entries", "scores")

    def __init__(self) -> None:
        self.scores: dict[bytes, float] = {}
        self.entries: list[tuple[float, bytes]] = []

    def add(self, member: bytes, score: float) -> None:
        old = self.scores.get(member)
        if old is not None:
            del self.entries[bisect.bisect_left(self.entries, (old, member))]
        self.scores[member] = score
        bisect.insort(self.entries, (score, member))

    def remove(self, member: bytes) -> bool:
        score = self.scores.pop(member, None)
        if score is None:
            return False
        del self.entries[bisect.bisect_left(self.entries, (score, member))]
        return True

    def __len__(self) -> int:
        return len(self.scores)


def _bound(value: bytes) -> tuple[float, bool]:
    """A ZRANGEBYSCORE bound: (score, exclusive)."""
    if value.startswith(b"("):
        return number(value[1:]), True
    return number(value), False


def format_score(score: float) -> bytes:
    """A score as Redis writes it in a reply (``%.17g``: integers without a decimal point)."""
    if math.isinf(score):
        return b"inf" if score > 0 else b"-inf"
    return (f"{score:.17g}").encode()


class Keyspace(KeyspaceBase):
    """One in-process keyspace (a Redis database), shared by every client and script of the memory store."""

    TYPE_NAMES = {**KeyspaceBase.TYPE_NAMES, SortedSet: "zset"}

    # Hashes.

    def cmd_hget(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], dict)
        return None if value is None else value.get(args[1])

    def cmd_hmget(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], dict) or {}
        return [value.get(f) for f in args[1:]]

    def cmd_hgetall(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], dict) or {}
        return [item for pair in value.items() for item in pair]

    def cmd_hset(self, args: Sequence[bytes]) -> Reply:
        if len(args) == 1 or len(args) % 2 == 0:
            raise ResponseError("ERR wrong number of arguments for 'hset' command")
        value = self._typed(args[0], dict, create=True)
        added = 0
        for i in range(1, len(args), 2):
            added += args[i] not in value
            value[args[i]] = bytes(args[i + 1])
        return added

    def cmd_hdel(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], dict)
        if value is None:
            return 0
        removed = sum(value.pop(f, None) is not None for f in args[1:])
        self._drop_if_empty(args[0], value)
        return removed

    def cmd_hlen(self, args: Sequence[bytes]) -> Reply:
        return len(self._typed(args[0], dict) or {})

    def cmd_hkeys(self, args: Sequence[bytes]) -> Reply:
        return list(self._typed(args[0], dict) or {})

    def cmd_hscan(self, args: Sequence[bytes]) -> Reply:
        # One pass answers the whole hash (cursor 0 back), as SCAN does here.
        options = {text(args[i]).upper(): args[i + 1] for i in range(2, len(args) - 1, 2)}
        pattern = glob(options["MATCH"]) if "MATCH" in options else None
        value = self._typed(args[0], dict) or {}
        return [b"0", [item for f, v in value.items() if pattern is None or pattern.match(f) for item in (f, v)]]

    def cmd_hincrby(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], dict, create=True)
        current = value.get(args[1])
        try:
            number = (int(current) if current is not None else 0) + integer(args[2])
        except ValueError:
            raise ResponseError("ERR hash value is not an integer") from None
        value[args[1]] = str(number).encode()
        return number

    # Sorted sets.

    def cmd_zadd(self, args: Sequence[bytes]) -> Reply:
        key, i = args[0], 1
        flags: set[str] = set()
        while i < len(args) and text(args[i]).upper() in ("NX", "XX", "GT", "LT", "CH", "INCR"):
            flags.add(text(args[i]).upper())
            i += 1
        pairs = args[i:]
        if not pairs or len(pairs) % 2:
            raise ResponseError("ERR syntax error")
        zset = self._typed(key, SortedSet, create=True)
        changed = added = 0
        last: float | None = None
        for j in range(0, len(pairs), 2):
            score, member = number(pairs[j]), bytes(pairs[j + 1])
            old = zset.scores.get(member)
            if "INCR" in flags:
                score += old or 0.0
            if (old is None and "XX" in flags) or (old is not None and "NX" in flags):
                continue
            if old is not None and (("GT" in flags and score <= old) or ("LT" in flags and score >= old)):
                continue
            if old is None:
                added += 1
            if old != score:
                changed += 1
                zset.add(member, score)
            last = score
        self._drop_if_empty(key, zset)
        if "INCR" in flags:
            return None if last is None else format_score(last)
        return changed if "CH" in flags else added

    def cmd_zincrby(self, args: Sequence[bytes]) -> Reply:
        return self.cmd_zadd([args[0], b"INCR", args[1], args[2]])

    def cmd_zscore(self, args: Sequence[bytes]) -> Reply:
        zset = self._typed(args[0], SortedSet)
        score = None if zset is None else zset.scores.get(args[1])
        return None if score is None else format_score(score)

    def cmd_zcard(self, args: Sequence[bytes]) -> Reply:
        zset = self._typed(args[0], SortedSet)
        return 0 if zset is None else len(zset)

    def cmd_zrem(self, args: Sequence[bytes]) -> Reply:
        zset = self._typed(args[0], SortedSet)
        if zset is None:
            return 0
        removed = sum(zset.remove(m) for m in args[1:])
        self._drop_if_empty(args[0], zset)
        return removed

    @staticmethod
    def _with_scores(entries: Sequence[tuple[float, bytes]], scores: bool) -> list[bytes]:
        if not scores:
            return [m for _, m in entries]
        return [item for s, m in entries for item in (m, format_score(s))]

    @staticmethod
    def _slice(n: int, start: int, stop: int) -> slice:
        start = max(0, start + n if start < 0 else start)
        stop = stop + n if stop < 0 else stop
        return slice(start, max(start, min(stop, n - 1) + 1))

    def cmd_zrange(self, args: Sequence[bytes]) -> Reply:
        options = {text(a).upper() for a in args[3:]}
        if options - {"WITHSCORES", "REV"}:
            raise ResponseError("ERR syntax error")
        zset = self._typed(args[0], SortedSet)
        entries = [] if zset is None else zset.entries
        if "REV" in options:
            entries = entries[::-1]
        return self._with_scores(
            entries[self._slice(len(entries), integer(args[1]), integer(args[2]))], "WITHSCORES" in options
        )

    def cmd_zrevrange(self, args: Sequence[bytes]) -> Reply:
        return self.cmd_zrange([*args[:3], b"REV", *args[3:]])

    def _by_score(self, key: bytes, low: bytes, high: bytes) -> list[tuple[float, bytes]]:
        zset = self._typed(key, SortedSet)
        if zset is None:
            return []
        (lo, lo_open), (hi, hi_open) = _bound(low), _bound(high)
        return [
            (s, m) for s, m in zset.entries if (s > lo if lo_open else s >= lo) and (s < hi if hi_open else s <= hi)
        ]

    def cmd_zrangebyscore(self, args: Sequence[bytes]) -> Reply:
        entries = self._by_score(args[0], args[1], args[2])
        scores, i = False, 3
        while i < len(args):
            option = text(args[i]).upper()
            if option == "WITHSCORES":
                scores, i = True, i + 1
            elif option == "LIMIT":
                offset, count = integer(args[i + 1]), integer(args[i + 2])
                entries = entries[offset:] if count < 0 else entries[offset : offset + count]
                i += 3
            else:
                raise ResponseError("ERR syntax error")
        return self._with_scores(entries, scores)

    def cmd_zremrangebyscore(self, args: Sequence[bytes]) -> Reply:
        doomed = self._by_score(args[0], args[1], args[2])
        return self.cmd_zrem([args[0], *(m for _, m in doomed)]) if doomed else 0

    def cmd_zremrangebyrank(self, args: Sequence[bytes]) -> Reply:
        zset = self._typed(args[0], SortedSet)
        if zset is None:
            return 0
        doomed = zset.entries[self._slice(len(zset), integer(args[1]), integer(args[2]))]
        return self.cmd_zrem([args[0], *(m for _, m in doomed)]) if doomed else 0

    # Lists.

    def cmd_lpush(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], list, create=True)
        for item in args[1:]:
            value.insert(0, bytes(item))
        return len(value)

    def cmd_rpush(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], list, create=True)
        value.extend(bytes(a) for a in args[1:])
        return len(value)

    def cmd_lrange(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], list) or []
        return value[self._slice(len(value), integer(args[1]), integer(args[2]))]

    def cmd_ltrim(self, args: Sequence[bytes]) -> Reply:
        value = self._typed(args[0], list)
        if value is not None:
            value[:] = value[self._slice(len(value), integer(args[1]), integer(args[2]))]
            self._drop_if_empty(args[0], value)
        return OK

    def cmd_llen(self, args: Sequence[bytes]) -> Reply:
        return len(self._typed(args[0], list) or [])
