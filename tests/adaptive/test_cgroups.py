"""Load inside a container: measured against the cgroup's CPU quota and memory limit (v2 and v1 layouts),
the host's figures without them. Each test lays out a cgroup tree as the kernel shows it, in a directory."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from adaptive import cgroups
from adaptive.load import CpuMeter, memory_used

GIB = 1 << 30


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="ascii")
    return root


@pytest.fixture
def v2(tmp_path: Path) -> Path:
    """A cgroup v2 container: 1.5 CPUs, 2 GiB, 1.5 GiB in use of which 0.5 GiB inactive file pages."""
    return write(tmp_path, {
        "cpu.max": "150000 100000", "cpu.stat": "usage_usec 10000000\nuser_usec 8000000",
        "memory.max": str(2 * GIB), "memory.current": str(3 * GIB // 2),
        "memory.stat": f"anon {GIB}\ninactive_file {GIB // 2}\nactive_file 0",
    })  # fmt: skip


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    """A cgroup v1 container: 0.5 CPU, 1 GiB, 0.75 GiB in use of which 0.25 GiB inactive file pages."""
    return write(tmp_path, {
        "cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.cfs_period_us": "100000", "cpuacct/cpuacct.usage": "4000000000",
        "memory/memory.limit_in_bytes": str(GIB), "memory/memory.usage_in_bytes": str(3 * GIB // 4),
        "memory/memory.stat": f"cache 1\ntotal_inactive_file {GIB // 4}",
    })  # fmt: skip


def test_v2_limits_and_usage_are_read(v2: Path):
    assert cgroups.cpu_limit(v2) == 1.5
    assert cgroups.cpu_seconds(v2) == 10.0
    assert cgroups.memory_fraction(v2) == 0.5  # (1.5 - 0.5) GiB of 2


def test_v1_limits_and_usage_are_read(v1: Path):
    assert cgroups.cpu_limit(v1) == 0.5
    assert cgroups.cpu_seconds(v1) == 4.0
    assert cgroups.memory_fraction(v1) == 0.5  # (0.75 - 0.25) GiB of 1


@pytest.mark.parametrize(
    "files",
    [
        {"cpu.max": "max 100000", "memory.max": "max", "memory.current": "100"},  # v2, no limits
        {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",
         "memory/memory.limit_in_bytes": "9223372036854771712", "memory/memory.usage_in_bytes": "100"},  # v1
        {"cpu.max": "garbage", "memory.max": "12x", "memory.current": "100"},  # unreadable
        {},  # no cgroup files at all
    ],
)  # fmt: skip
def test_no_limit_or_an_unreadable_file_leaves_the_hosts_figures(tmp_path: Path, files: dict[str, str]):
    root = write(tmp_path, files)
    assert cgroups.cpu_limit(root) is None
    assert cgroups.memory_fraction(root) is None
    assert memory_used(root) == psutil.virtual_memory().percent / 100  # the host's, as before containers
    assert CpuMeter(root).cpus is None


def test_a_memory_limit_above_the_hosts_memory_limits_nothing(v2: Path):
    write(v2, {"memory.max": str(psutil.virtual_memory().total * 2)})
    assert cgroups.memory_fraction(v2, below=psutil.virtual_memory().total) is None


def test_cpu_is_the_cgroups_time_over_what_its_quota_allows(v1: Path):
    """0.5 CPU: 0.25 s of CPU time in one second of wall time is half the quota; 1 s in 1 s is all of it
    (capped at 1), moving a clock the meter is given instead of sleeping."""
    now = [100.0]
    meter = CpuMeter(v1, clock=lambda: now[0])
    assert meter.cpus == 0.5
    now[0] += 1.0
    write(v1, {"cpuacct/cpuacct.usage": str(4_250_000_000)})
    assert meter.read() == pytest.approx(0.5)
    now[0] += 1.0
    write(v1, {"cpuacct/cpuacct.usage": str(5_250_000_000)})
    assert meter.read() == 1.0


def test_memory_used_is_the_containers_when_limited(v2: Path):
    assert memory_used(v2) == 0.5
