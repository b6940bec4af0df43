"""gunicorn hooks for the platform's Prometheus metrics, for a project's own ``gunicorn.conf.py``::

    from quotas.gunicorn import child_exit, on_starting  # noqa: F401  (gunicorn reads them by name)

Several gunicorn workers each count their own metrics; prometheus-client's multiprocess mode sums them when
``/metrics`` is read. Importing this module sets ``PROMETHEUS_MULTIPROC_DIR`` (when the environment does not)
before anything imports prometheus-client, which picks its storage at import: to ``$RUN_DIR/prometheus``, else
``./run/prometheus`` under the directory gunicorn starts in. Celery processes that should be counted on the same
``/metrics`` need the same variable. Then:

- :func:`on_starting` (the master, once): creates the directory and removes the files of processes that no
  longer run (an earlier run's workers); files of live processes stay (Celery may share the directory);
- :func:`child_exit` (the master, per worker): removes a finished worker's live gauges; its counters stay, so
  totals never go backwards when a worker is replaced.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_FILE_PID = re.compile(r"_(\d+)\.db$")

os.environ.setdefault(
    "PROMETHEUS_MULTIPROC_DIR", str(Path(os.environ.get("RUN_DIR") or Path.cwd() / "run") / "prometheus")
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
    """Remove the metric files of ``directory`` whose process no longer runs; returns their names."""
    removed = []
    for path in directory.glob("*.db"):
        match = _FILE_PID.search(path.name)
        if match and not _pid_alive(int(match.group(1))):
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def on_starting(server: Any) -> None:
    """gunicorn's hook in the master at start: the metrics directory exists, without dead processes' files."""
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    removed = clean_stale_metrics(directory)
    if removed:
        server.log.info("Removed %d stale metric files from %s", len(removed), directory)


def child_exit(server: Any, worker: Any) -> None:
    """gunicorn's hook in the master when a worker exits: its live gauges go, its counters stay."""
    from prometheus_client import multiprocess  # after the variable is set: it picks the storage at import

    multiprocess.mark_process_dead(worker.pid)
