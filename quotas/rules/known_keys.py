"""The hashes of every usable API key, so that a blocked address is answered without a query per key.

While a client address is blocked for failed authentications
(:mod:`quotas.identity.auth_failures`), a key this platform does not know is
refused at once and a valid key is answered on its merits. Telling them apart
without a database query per guess needs every usable key's hash in memory.
:class:`KnownKeys` keeps the first 64 bits of each (a random guess matches one
by chance about once in 2**64 / keys) in a sorted array: 8 bytes a key instead
of about 80 in a set of Python ints (200,000 keys: 1.6 MB instead of 15.6 MB).

It also keeps the rules version read *before* the hashes were: a key issued
afterwards bumps that version, so a set whose version is no longer Redis's may
lack a key that authenticates (see :meth:`quotas.runtime.rules_cache.RulesCache.may_know_key`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

#: Hex digits of a key hash kept (64 bits).
PREFIX_DIGITS = 16


def _prefix(key_hash: str) -> int:
    return int(key_hash[:PREFIX_DIGITS], 16)


class KnownKeys:
    """The usable keys' hash prefixes as of rules version ``version`` (immutable once built)."""

    __slots__ = ("_prefixes", "version")

    def __init__(self, version: str, key_hashes: Iterable[str]) -> None:
        self.version = version
        self._prefixes = array("Q", sorted({_prefix(h) for h in key_hashes}))

    def __contains__(self, key_hash: object) -> bool:
        if not isinstance(key_hash, str):
            return False
        prefix = _prefix(key_hash)
        i = bisect_left(self._prefixes, prefix)
        return i < len(self._prefixes) and self._prefixes[i] == prefix

    def __len__(self) -> int:
        return len(self._prefixes)

    @property
    def nbytes(self) -> int:
        """Bytes the prefixes take (for the docs' sizing and the tests)."""
        return self._prefixes.itemsize * len(self._prefixes)
