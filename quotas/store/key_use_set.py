"""When each API key was last used, and from where, in Redis: two keys under the prefix.

* ``<prefix>:keys:last-used``, a sorted set: member the key's id, score the epoch seconds of its last use,
  written with ``ZADD GT`` so an older note never replaces a newer one.
* ``<prefix>:keys:last-from``, a hash: field the key's id, value ``"<epoch seconds> <address>"``, the address
  of the latest use whose address is known, written by a script that keeps the newer of two notes (the same
  rule, for one value that is two).

Two keys rather than one so that the sorted set stays as it was (a process of the previous release writes it
still); each is written and read by its own single-key calls, so either may sit on any node of a cluster. See
:mod:`quotas.runtime.key_use` for who notes and when. Every call raises
:class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotas.store.failures import unavailable

_SUFFIX = "keys:last-used"
_FROM_SUFFIX = "keys:last-from"

# A note replaces the hash's value only when it is newer (ARGV: id, seconds, address, ...); both scripts are
# a few lines, sent as usage_hash_format's snapshot is (register_script: EVALSHA on any server, the memory store's too).
_WRITE_FROM = """
for i = 1, #ARGV, 3 do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  if not old or tonumber(string.match(old, '^%S+')) < tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1] .. ' ' .. ARGV[i + 2])
  end
end
return 0
"""
# Drops the hash's notes older than ARGV[1] in one atomic step: a newer note written meanwhile stays.
_FORGET_FROM = """
local all, gone = redis.call('HGETALL', KEYS[1]), 0
for i = 1, #all, 2 do
  if tonumber(string.match(all[i + 1], '^%S+')) < tonumber(ARGV[1]) then
    redis.call('HDEL', KEYS[1], all[i])
    gone = gone + 1
  end
end
return gone
"""


class KeyUseSet:
    """Keys' last use under ``prefix`` in the Redis ``client`` holds."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.key = last_used_key(prefix)
        self.from_key = last_used_from_key(prefix)

    def write(self, seen: Mapping[int, tuple[float, str | None]]) -> None:
        """Note each key id of ``seen`` as used at its time from its address (None: unknown), unless a later
        use is noted already (one ZADD, and one script call for the addresses known)."""
        with unavailable("writing keys' last use"):
            self._client.zadd(self.key, {str(k): at for k, (at, _) in seen.items()}, gt=True)
            args = [part for k, (at, address) in seen.items() if address for part in (k, repr(at), address)]
            if args:
                self._client.register_script(_WRITE_FROM)(keys=[self.from_key], args=args)

    def last_used(self) -> dict[int, float]:
        """Every key id noted, with the epoch seconds of its last use."""
        with unavailable("reading keys' last use"):
            return {int(member): score for member, score in self._client.zrange(self.key, 0, -1, withscores=True)}

    def last_used_from(self) -> dict[int, tuple[float, str]]:
        """Every key id whose address is noted, with the epoch seconds and the address of its latest use."""
        with unavailable("reading where keys were last used"):
            notes = self._client.hgetall(self.from_key)
        out = {}
        for field, value in notes.items():
            at, _, address = _text(value).partition(" ")
            out[int(field)] = (float(at), address)
        return out

    def forget_before(self, before: float) -> int:
        """Drop the notes of keys last used before ``before`` (epoch seconds); returns how many keys went."""
        with unavailable("dropping old notes of keys' last use"):
            self._client.register_script(_FORGET_FROM)(keys=[self.from_key], args=[repr(before)])
            return int(self._client.zremrangebyscore(self.key, "-inf", f"({before}"))


def last_used_key(prefix: str) -> str:
    """The sorted set of keys' last use under ``prefix``."""
    return f"{prefix}:{_SUFFIX}"


def last_used_from_key(prefix: str) -> str:
    """The hash of where keys were last used under ``prefix``."""
    return f"{prefix}:{_FROM_SUFFIX}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
