"""gunicorn settings: ``gunicorn -c config/gunicorn.py config.wsgi:application`` (the Procfile's ``web``).

Only what multi-process Prometheus metrics need (see :mod:`quotas.metrics`);
bind, workers and timeouts stay on the command line. Every worker writes its
metrics to files in ``PROMETHEUS_MULTIPROC_DIR`` and ``/metrics`` sums them:

- the variable is set here, before anything imports prometheus-client (it
  picks its storage at import), when the environment does not set it: to
  ``$RUN_DIR/prometheus`` (``run/prometheus`` in the checkout);
- at start-up, the master removes the files of processes that no longer run
  (an earlier run's workers). Files of live processes stay: Celery shares the
  directory under ``make run``;
- when a worker exits, the master removes its live gauges (``child_exit``).
  Its counters stay, so totals never go backwards when a worker is replaced.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_BASE_DIR = Path(__file__).resolve().parent.parent
_FILE_PID = re.compile(r"_(\d+)\.db$")

os.environ.setdefault(
    "PROMETHEUS_MULTIPROC_DIR", str(Path(os.environ.get("RUN_DIR") or _BASE_DIR / "run") / "prometheus")
)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def clean_stale_metrics(directory: Path) -> list[str]:
    """Remove metric files whose process no longer runs; return their names."""
    removed = []
    for path in directory.glob("*.db"):
        match = _FILE_PID.search(path.name)
        if match and not _pid_alive(int(match.group(1))):
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def on_starting(server: Any) -> None:
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    removed = clean_stale_metrics(directory)
    if removed:
        server.log.info("Removed %d stale metric files from %s", len(removed), directory)


def child_exit(server: Any, worker: Any) -> None:
    from prometheus_client import multiprocess  # after the variable is set: it picks the storage at import

    multiprocess.mark_process_dead(worker.pid)
