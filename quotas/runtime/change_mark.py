"""The rules' change mark in the database: how a process sees a rules change while Redis is unreadable.

Every process polls the rules version in Redis (:mod:`quotas.runtime.rules_cache`). While Redis is unreadable
that version reads ``"?"`` before and after a change, so a key revoked through one process would keep working in
the others until Redis came back. A backend that keeps a change mark of its own (``change_mark()`` and
``mark_change()``, see :class:`~quotas.rules.snapshot.RulesBackend`; the database backend does) is asked
instead: the mark is read before each load of the snapshot and, while the version is unreadable, by the poller
at most once every :data:`LOOK_EVERY` seconds; when it moved, the snapshot is reloaded. The process that commits
a change moves the mark on, and its poller retries a move the database refused. No request reads the mark.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, close_old_connections

logger = logging.getLogger(__name__)

#: Fewest seconds between two reads of the mark by the poller (only while the rules version is unreadable): a
#: revocation reaches every process within about this plus the poll interval.
LOOK_EVERY = 1.0


class ChangeMark:
    """The change mark of ``backend`` (nothing, for a backend without one)."""

    def __init__(self, backend: Any) -> None:
        self._read: Callable[[], Any] | None = getattr(backend, "change_mark", None)
        self._move: Callable[[], Any] | None = getattr(backend, "mark_change", None)
        self.loaded: Any = None  # the mark read before the snapshot in use was loaded (None: not read)
        self._look_at = 0.0
        self._read_failures = 0
        # A move the database refused: owed until the poller's retry lands (as the Redis version's bump is).
        self._owed = False
        self._move_failures = 0
        self._lock = threading.Lock()

    def before_load(self) -> None:
        """Note the mark before the snapshot is loaded: a change committed after that moves it again.

        Raises ``DatabaseError`` (the load would fail too).
        """
        if self._read is not None:
            self.loaded = self._read()

    def moved(self) -> bool:
        """Whether the mark moved since the snapshot was loaded; read at most once every :data:`LOOK_EVERY`
        seconds (False between reads, and while the database fails)."""
        read = self._read
        if read is None or self.loaded is None:
            return False
        now = time.monotonic()
        if now < self._look_at:
            return False
        self._look_at = now + LOOK_EVERY
        try:
            mark = read()
        except DatabaseError as exc:
            self._read_failures += 1
            if self._read_failures == 1:
                logger.warning("quotas: the rules change mark could not be read (%s); retrying every second", exc)
            return False
        finally:
            close_old_connections()  # the poller's connection, handed back as a request's is (CONN_MAX_AGE)
        self._read_failures = 0
        return bool(mark != self.loaded)

    def move(self) -> None:
        """Move the mark on: a rules change was committed. A move the database refuses is owed (:meth:`retry`)."""
        if self._move is None:
            return
        with self._lock:
            self._owed = True
            self._try_move()

    def retry(self) -> None:
        """The poller's visit: make a move the database refused (off the request path)."""
        if not self._owed:
            return
        with self._lock:
            self._try_move()
        close_old_connections()

    def _try_move(self) -> None:
        if not self._owed or self._move is None:
            return
        try:
            self._move()
        except DatabaseError as exc:
            self._move_failures += 1
            if self._move_failures == 1:
                logger.warning("quotas: could not move the rules change mark (%s); the poller retries it", exc)
            return
        self._owed = False
        if self._move_failures:
            logger.warning("quotas: rules change mark moved after %d failed attempts", self._move_failures)
            self._move_failures = 0
