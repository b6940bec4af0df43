"""Stopping the servers tests start in process groups of their own (gunicorn, Celery, honcho)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable


def stop_groups(procs: Iterable[subprocess.Popen], timeout: float = 10) -> None:
    """SIGTERM each process's group, wait for all of them, then SIGKILL the groups that would not stop."""
    procs = list(procs)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)
