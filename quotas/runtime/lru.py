"""A small least-recently-used map, shared by a process's threads: the rules cache's subscribers by key and by
user, and the unknown keys it remembers (:mod:`quotas.runtime.rules_cache`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

_ABSENT = object()  # no entry in an LRU (where None is a value)


class LRU(OrderedDict):
    """A small least-recently-used map, per process.

    Safe to share between a process's threads (gthread workers, the poller):
    each OrderedDict operation is atomic under the GIL, but another thread may
    evict or clear a key between two of them, so a vanished key reads as a miss
    rather than raising KeyError.
    """

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def lookup(self, key: Any, default: Any = None) -> Any:
        """The value of ``key`` (now the most recent), or ``default``."""
        value = self.get(key, _ABSENT)  # a miss (every new client) raises nothing: an exception costs more
        if value is _ABSENT:
            return default
        try:  # noqa: SIM105  (contextlib.suppress is a context manager's two calls on every hit)
            self.move_to_end(key)
        except KeyError:  # evicted meanwhile: the value read is still this key's
            pass
        return value

    def put(self, key: Any, value: Any) -> None:
        """Remember ``value``, evicting the least recently used entries beyond ``size``."""
        self[key] = value
        while len(self) > self.size:
            try:
                self.popitem(last=False)
            except KeyError:  # emptied meanwhile (a reload cleared it)
                break
