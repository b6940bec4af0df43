"""Load measurements: CPU and memory (the container's cgroup limits, else the host's, by psutil), database pool
and server saturation.

Every measurement returns a fraction in ``0..1``, or ``None`` when it is unavailable (SQLite has no
pool and no connection limit): unavailable is never reported as zero load. None of this runs on the
request path: :mod:`adaptive.reporter` calls :func:`host_sample` from a background thread and the
controller calls :func:`db_server_saturation` once per run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from . import cgroups

logger = logging.getLogger(__name__)

_SERVER_QUERY = (
    "SELECT count(*) FILTER (WHERE backend_type = 'client backend'), "
    "current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int "
    "FROM pg_stat_activity"
)


class CpuMeter:
    """Busy fraction of the CPUs this process may use since the previous call (its own baseline, unlike
    psutil's global one): of the cgroup's CPU quota when one limits it (:mod:`adaptive.cgroups`), else of all
    the host's CPUs."""

    def __init__(self, root: Path = cgroups.ROOT, clock: Callable[[], float] = time.monotonic) -> None:
        self._root, self._clock = root, clock
        cpus = cgroups.cpu_limit(root)
        # A quota of at least the host's CPUs limits nothing: the host's figures say the same, more cheaply.
        self.cpus = cpus if cpus is not None and cpus < (psutil.cpu_count() or 1) else None
        self._last = psutil.cpu_times()
        self._last_cgroup = (clock(), cgroups.cpu_seconds(root))
        self._lock = threading.Lock()

    def read(self) -> float:
        with self._lock:
            now = psutil.cpu_times()
            last, self._last = self._last, now
            cgroup_now = (self._clock(), cgroups.cpu_seconds(self._root)) if self.cpus is not None else None
            cgroup_last, self._last_cgroup = self._last_cgroup, cgroup_now or self._last_cgroup
        if cgroup_now is not None and self.cpus is not None:
            (at, used), (then, used_before) = cgroup_now, cgroup_last
            if used is not None and used_before is not None and at > then:
                return min(1.0, max(0.0, (used - used_before) / ((at - then) * self.cpus)))
        idle = _idle(now) - _idle(last)
        total = _total(now) - _total(last)
        if total <= 0:
            return 0.0
        return min(1.0, max(0.0, 1.0 - idle / total))


def _idle(t: Any) -> float:
    return t.idle + getattr(t, "iowait", 0.0)


def _total(t: Any) -> float:
    # Linux counts guest time inside user time already.
    return sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def memory_used(root: Path = cgroups.ROOT) -> float:
    """Fraction of the memory this process may use that is in use: the cgroup's working set over its limit when
    one is set below the host's memory (:mod:`adaptive.cgroups`), else the host's (psutil's ``total -
    available``)."""
    host = psutil.virtual_memory()
    limited = cgroups.memory_fraction(root, below=host.total)
    return limited if limited is not None else host.percent / 100.0


def db_pool_saturation(conn: BaseDatabaseWrapper | None = None) -> float | None:
    """Share of the connection pool of ``conn`` (default: this process's default database) in use,
    waiters included, capped at 1.

    None when the database has no pool (SQLite, or PostgreSQL without ``OPTIONS['pool']``).
    Reads the pool's own statistics; opens no connection.
    """
    conn = conn or connections["default"]
    if conn.vendor != "postgresql" or not conn.settings_dict.get("OPTIONS", {}).get("pool"):
        return None
    pool = getattr(conn, "pool", None)  # PostgreSQL's wrapper only (Django 5.1+), typed as any backend's
    if pool is None:
        return None
    stats = pool.get_stats()
    size = stats.get("pool_max") or 0
    if size <= 0:
        return None
    in_use = stats.get("pool_size", 0) - stats.get("pool_available", 0) + stats.get("requests_waiting", 0)
    return min(1.0, max(0.0, in_use / size))


def db_server_saturation(conn: BaseDatabaseWrapper | None = None) -> float | None:
    """Client connections of the PostgreSQL server of ``conn`` (default: the default database) against
    what it accepts from non-superusers.

    None for other databases or when the query fails for another reason than the server refusing
    connections ("too many clients", which is saturation: 1.0).
    """
    conn = conn or connections["default"]
    if conn.vendor != "postgresql":
        return None
    try:
        with conn.cursor() as cursor:
            # Inside a transaction PostgreSQL answers from a cached statistics snapshot: take a fresh one.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(_SERVER_QUERY)
            in_use, max_connections, reserved = cursor.fetchone()
    except DatabaseError as exc:
        if "too many clients" in str(exc) or "remaining connection slots" in str(exc):
            return 1.0
        logger.warning("adaptive: database server saturation unreadable: %s", exc)
        return None
    usable = max(1, max_connections - reserved)
    return min(1.0, in_use / usable)


def host_name() -> str:
    """This host's name as it appears in samples and keys."""
    return socket.gethostname() or "localhost"


def host_sample(cpu: CpuMeter, redis_ms: float | None = None) -> dict[str, Any]:
    """This process's sample: host, pid, time, cpu, memory, db (None without a pool) and Redis latency."""
    try:
        db = db_pool_saturation()
    except Exception:  # a pool being closed or rebuilt must not kill the reporter
        logger.warning("adaptive: connection pool statistics unreadable", exc_info=True)
        db = None
    return {
        "host": host_name(),
        "pid": os.getpid(),
        "at": time.time(),
        "cpu": round(cpu.read(), 4),
        "memory": round(memory_used(), 4),
        "db": None if db is None else round(db, 4),
        "redis_ms": None if redis_ms is None else round(redis_ms, 3),
    }
