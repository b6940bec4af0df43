"""When each API key was last used, in Redis: one sorted set, ``<prefix>:keys:last-used``.

Member: the key's id; score: the epoch seconds of its last use. Written with ``ZADD GT`` so an older note
never replaces a newer one (see :mod:`quotas.runtime.key_use` for who notes and when). Every call raises
:class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quotas.store.failures import unavailable

_SUFFIX = "keys:last-used"


class KeyUseSet:
    """Keys' last use under ``prefix`` in the Redis ``client`` holds."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.key = last_used_key(prefix)

    def write(self, seen: Mapping[int, float]) -> None:
        """Note each key id of ``seen`` as used at its time, unless a later use is noted already (one ZADD)."""
        with unavailable("writing keys' last use"):
            self._client.zadd(self.key, {str(k): v for k, v in seen.items()}, gt=True)

    def last_used(self) -> dict[int, float]:
        """Every key id noted, with the epoch seconds of its last use."""
        with unavailable("reading keys' last use"):
            return {int(member): score for member, score in self._client.zrange(self.key, 0, -1, withscores=True)}

    def forget_before(self, before: float) -> int:
        """Drop the notes of keys last used before ``before`` (epoch seconds); returns how many went."""
        with unavailable("dropping old notes of keys' last use"):
            return int(self._client.zremrangebyscore(self.key, "-inf", f"({before}"))


def last_used_key(prefix: str) -> str:
    """The sorted set of keys' last use under ``prefix``."""
    return f"{prefix}:{_SUFFIX}"
