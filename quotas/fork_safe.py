"""Locks that live as long as the process, made anew in a forked child.

A lock one of the parent's threads held at ``fork()`` stays held in the child for ever: the thread that would
release it was not copied. gunicorn's workers of a ``--preload`` master and multiprocessing's children are such
children. The engine makes its own lock anew and its child builds a runtime of its own (quotas.engine); the
other locks that outlive a request (module-level ones, and those of module-level objects) are these.
"""

from __future__ import annotations

import os
import threading
import weakref


class ForkSafeLock:
    """A :class:`threading.Lock` (``with lock:``) that a forked child finds unlocked.

    Not for a lock its own thread holds while it forks: the child would release a lock it never took.
    """

    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        _LOCKS.add(self)

    def __enter__(self) -> bool:
        return self.lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.lock.release()


#: Every ForkSafeLock of the process, for the fork hook (held weakly).
_LOCKS: weakref.WeakSet[ForkSafeLock] = weakref.WeakSet()


def _renew() -> None:
    for lock in list(_LOCKS):
        lock.lock = threading.Lock()


os.register_at_fork(after_in_child=_renew)
