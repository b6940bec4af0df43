"""Stopping the servers tests start in process groups of their own (gunicorn, Celery, honcho)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable


def stop_groups(procs: Iterable[subprocess.Popen], timeout: float = 10) -> None:
    """SIGKILL each process's group (the process and everything it started), then reap each process.

    Not SIGTERM first: the tests that start these servers are done with them by then, nothing reads what an
    orderly shutdown would leave, and it cost seconds a test (Celery's warm shutdown of its pool, gunicorn's
    graceful stop: 2.4 s of the adaptive end-to-end test's teardown, measured 2026-11-29). How the project's
    processes stop on a signal is tested where it is the point (tests/test_run.py's SIGINT).
    """
    procs = list(procs)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait(timeout=timeout)
