"""Every usable API key's hash, read in the background for :meth:`quotas.runtime.rules_cache.RulesCache.may_know_key`.

The set (:class:`~quotas.rules.known_keys.KnownKeys`) is wanted once some
client address is blocked for failed authentications in this process, and read
again whenever the rules version moves (the runtime's poller asks); each read
runs on a thread of its own, one at a time, never on a request's path.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, connections

from quotas.rules.known_keys import KnownKeys
from quotas.rules.snapshot import RulesBackend

logger = logging.getLogger("quotas.runtime.rules_cache")  # where these warnings were logged before the split


class UsableKeys:
    """The usable keys' hashes of ``backend`` as last read (``current``), with the rules version read before
    them (``read_version()``, which a key issued afterwards moves: a set whose version is no longer Redis's
    may lack a key that authenticates)."""

    def __init__(self, backend: RulesBackend | None, read_version: Callable[[], str]) -> None:
        self.backend = backend
        self._read_version = read_version
        self.current: KnownKeys | None = None  # None: not read in this process
        self.wanted = False  # some address was blocked here: the poller keeps the set current
        self._building = threading.Lock()

    def refresh(self) -> None:
        """Read every usable key's hash again, on a thread of its own; at most one read at a time."""
        if self.backend is None or not self._building.acquire(blocking=False):
            return
        try:
            threading.Thread(target=self._read, name="quota-known-keys", daemon=True).start()
        except BaseException:
            self._building.release()
            raise

    def _read(self) -> None:
        backend = self.backend
        try:
            if backend is None:
                return
            # The version first: a key issued after the hashes are read moves it, so the set reads as stale.
            version = self._read_version()
            self.current = KnownKeys(version, backend.known_key_hashes())
        except DatabaseError as exc:
            logger.warning("quotas: the usable API keys could not be read (%s); keys are looked up one by one", exc)
        finally:
            connections.close_all()  # this thread's own connection: it serves no request that would close it
            self._building.release()
