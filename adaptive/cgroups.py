"""The CPU and memory a container may use, from its cgroup (v2, else v1), so its load is measured against them.

psutil reads ``/proc/stat`` and ``/proc/meminfo``, which inside a container are the host's: a container limited
to 1 CPU on a 16-CPU host can be saturated while the host is 6 % busy. When the process's cgroup sets a CPU
quota or a memory limit, :mod:`adaptive.load` measures against it instead:

* memory: the working set (usage less inactive file pages, which the kernel reclaims first: what
  ``kubectl top`` and the OOM killer look at) over the limit;
* CPU: the cgroup's CPU time over the wall time the quota allows (``quota / period`` CPUs).

Only the files of the process's own cgroup hierarchy are read, from ``/sys/fs/cgroup`` as a container mounts it:
cgroup v2's ``cpu.max``, ``cpu.stat``, ``memory.max``, ``memory.current`` and ``memory.stat``, or v1's
``cpu/cpu.cfs_quota_us``, ``cpu/cpu.cfs_period_us``, ``cpuacct/cpuacct.usage``,
``memory/memory.limit_in_bytes``, ``memory/memory.usage_in_bytes`` and ``memory/memory.stat``. A missing or
unreadable file, or no limit, is None: the host's figures apply.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
#: cgroup v1 writes "no limit" as a huge number (the largest page-aligned 64-bit value); anything this big is none.
_NO_LIMIT = 1 << 60


def _read(path: Path) -> str | None:
    try:
        # Bytes decoded, not a text file opened: opening one looks its codec up (an import the first time), and
        # in a process forked from a threaded one (a gunicorn worker; tests/adaptive/test_reporter.py's child)
        # that lookup once failed with "unknown encoding: ascii", likely an import lock held at the fork by a
        # thread the child does not have, and the reporter thread died. Decoding ASCII looks nothing up.
        return path.read_bytes().decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _stat(path: Path, name: str) -> int | None:
    """The value of ``name`` in a ``key value`` file (cpu.stat, memory.stat)."""
    text = _read(path)
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return None


def _number(path: Path) -> int | None:
    text = _read(path)
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def cpu_limit(root: Path = ROOT) -> float | None:
    """CPUs the cgroup may use (its quota over its period), or None without a quota."""
    v2 = _read(root / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        if quota.isdigit() and period.isdigit() and int(period) > 0:
            return int(quota) / int(period)
        return None
    quota_us, period_us = _number(root / "cpu/cpu.cfs_quota_us"), _number(root / "cpu/cpu.cfs_period_us")
    if quota_us is None or period_us is None or quota_us <= 0 or period_us <= 0:  # v1's -1: no quota
        return None
    return quota_us / period_us


def cpu_seconds(root: Path = ROOT) -> float | None:
    """The CPU time the cgroup's processes have used, in seconds (None: unreadable)."""
    usec = _stat(root / "cpu.stat", "usage_usec")
    if usec is not None:
        return usec / 1e6
    nsec = _number(root / "cpuacct/cpuacct.usage")
    return None if nsec is None else nsec / 1e9


def memory_fraction(root: Path = ROOT, below: int | None = None) -> float | None:
    """The cgroup's working set over its memory limit, capped at 1, or None without a limit (or with one of at
    least ``below`` bytes: a limit above the host's memory limits nothing)."""
    limit = _read(root / "memory.max")
    if limit is not None:
        used, inactive = _number(root / "memory.current"), _stat(root / "memory.stat", "inactive_file")
    else:
        limit = _read(root / "memory/memory.limit_in_bytes")
        used = _number(root / "memory/memory.usage_in_bytes")
        inactive = _stat(root / "memory/memory.stat", "total_inactive_file")
    if limit is None or not limit.isdigit() or used is None:
        return None
    cap = int(limit)
    if cap <= 0 or cap >= _NO_LIMIT or (below is not None and cap >= below):
        return None
    return min(1.0, max(0, used - (inactive or 0)) / cap)
