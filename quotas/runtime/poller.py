"""The poller: one daemon thread per process doing the runtime's background work every interval.

Threads do not survive ``fork()``, and a forked child builds a runtime of its
own (:class:`quotas.engine.Engine`): :meth:`Poller.ensure` starts the thread
in the process that uses the runtime, the first time it does.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: This process's id, kept current by a fork hook: :meth:`quotas.engine.Engine.runtime` compares it with the
#: poller's on every request, without a system call.
current_pid = os.getpid()


def _forked() -> None:
    global current_pid
    current_pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


class Poller:
    """Calls ``work`` every ``interval`` seconds on a daemon thread of this process (never with 0), ``name``."""

    def __init__(self, interval: float, work: Callable[[], None], name: str = "quota-poller") -> None:
        self.interval = interval
        self.work = work
        self.name = name
        self.pid: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def ensure(self) -> None:
        """Start this process's thread, unless it runs already (or polling is off)."""
        if self.pid == current_pid:
            return
        self.pid = current_pid  # this process is seen to, with a thread or (polling off) without one
        if self.interval <= 0:
            return
        self._stop = threading.Event()
        thread = threading.Thread(target=self._run, args=(self._stop,), name=self.name, daemon=True)
        thread.start()
        self._thread = thread

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                self.work()
            except Exception:  # the poller must outlive any one failure (it also probes a down Redis)
                logger.exception("quotas: the %s thread failed; retrying next interval", self.name)

    def stop(self) -> None:
        """Stop the thread, waiting for a visit under way.

        Waiting means nothing polls a Redis that is shut down next (a spurious
        "unreadable" warning); a visit is bounded by the socket timeout.
        """
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread() and self.pid == os.getpid():
            thread.join(timeout=2.0)
