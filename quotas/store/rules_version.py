"""The rules version in Redis: one counter, ``<prefix>:rules:version``, bumped when the rules change.

Every process polls it and reloads its rules snapshot when it moved (see
:mod:`quotas.runtime.rules_cache`). Every call raises :class:`~quotas.exceptions.StoreUnavailable` when
Redis fails.
"""

from __future__ import annotations

from typing import Any

from quotas.contract.keys import rules_version_key
from quotas.store.failures import unavailable


class RulesVersion:
    """The rules version under ``prefix`` in the Redis ``client`` holds."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.key = rules_version_key(prefix)

    def read(self) -> str:
        """The version now: ``"0"`` before any bump."""
        with unavailable("reading the rules version"):
            raw = self._client.get(self.key)
        return raw.decode() if raw else "0"

    def bump(self) -> None:
        """Move the version on: every process reloads its rules within its poll interval."""
        with unavailable("bumping the rules version"):
            self._client.incr(self.key)
