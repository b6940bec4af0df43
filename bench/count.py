"""Section 13: CPU instructions per throttle decision, counted by valgrind's cachegrind.

Wall clock on a shared 2-core machine wanders by 10 % or more; the
instructions a process executes do not. Each workload of
:mod:`bench.count_workload` runs twice under ``valgrind --tool=cachegrind
--cache-sim=no``, with W and with W + N decisions; the difference of the two
totals (``Ir``, the out file's ``summary:``) divided by N is what one decision
costs, with Python's start, Django's setup, the connections and the warm-up
cancelled out. Only the client process is counted: Redis is a separate
process, outside valgrind. "Own" is a workload's figure minus the no-throttle
view's, and each own figure is divided by the matching ``limits`` row's own
(:data:`PEERS`).

One valgrind process does the setup once and forks the runs (see
:mod:`bench.count_workload`), one per core at a time, each on a private
redis-server of its lane; a run's script calls, read from Redis's
``INFO commandstats`` around its last N requests, are the Redis round trips
per decision, which for a busy client show its local allowances at work. The
process gets ``PYTHONHASHSEED=0``, so that one run of the section hashes (and
lays out its dicts) like the next.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.embedded_redis import RedisServer

from .count_workload import COUNTED_QUOTAS, WORKLOADS

VALGRIND_MISSING = "valgrind is not installed (Debian: apt-get install valgrind)"
BASELINE = "no_throttle"
#: Each throttled workload's peer: the ``limits`` row whose own instructions its own is divided by (the
#: issue's comparison: cold rows against one ``hit()``, busy rows against the same busy client's ``hit()``).
PEERS = {
    "limits_1": "limits_1",
    "limits_5": "limits_1",
    "quota_1": "limits_1",
    "quota_5": "limits_1",
    "limits_busy": "limits_busy",
    "quota_1_busy": "limits_busy",
    "quota_5_busy": "limits_busy",
}
ROOT = Path(__file__).resolve().parent.parent


class CountError(RuntimeError):
    """A run under valgrind failed, or its out file has no instruction count."""


@dataclass(frozen=True, slots=True)
class Count:
    """One run: the instructions its process executed, and the script calls Redis received during its last N
    requests (none for the W run)."""

    instructions: int
    script_calls: int


def valgrind_binary() -> str | None:
    """valgrind's path, or None when it is not installed."""
    return shutil.which("valgrind")


def read_instructions(out_file_text: str) -> int:
    """The total ``Ir`` of a cachegrind out file: ``summary:``'s figure in the ``events:`` line's ``Ir`` column."""
    events: list[str] = []
    for line in out_file_text.splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:") and "Ir" in events:
            return int(line.split()[1:][events.index("Ir")])
    raise CountError("the cachegrind out file has no summary of Ir")


def per_decision(short: int, long: int, decisions: int) -> float:
    """Instructions per decision: what the ``long`` run executed beyond the ``short`` one, over the
    ``decisions`` it made in addition."""
    return (long - short) / decisions


def summarize(runs: dict[str, tuple[Count, Count]], decisions: int) -> dict[str, dict[str, Any]]:
    """Each workload's figures from its (W, W + N) runs: instructions per decision, own (minus
    :data:`BASELINE`'s), own over its peer's own (:data:`PEERS`), script calls per decision."""
    rows: dict[str, dict[str, Any]] = {}
    for name, (short, long) in runs.items():
        rows[name] = {
            "instructions_per_decision": round(per_decision(short.instructions, long.instructions, decisions)),
            "script_calls_per_decision": round(long.script_calls / decisions, 3),
            "instructions": [short.instructions, long.instructions],
        }
    base = rows[BASELINE]["instructions_per_decision"]
    for name, row in rows.items():
        if name != BASELINE:
            row["own"] = row["instructions_per_decision"] - base
    for name, peer in PEERS.items():
        if name in rows and peer in rows:
            theirs = rows[peer]["own"]
            rows[name]["own_vs_limits"] = round(rows[name]["own"] / theirs, 2) if theirs > 0 else None
    return rows


@contextmanager
def _servers(lanes: int, base: Path) -> Iterator[list[str]]:
    """The URLs of ``lanes`` private redis-servers, stopped on exit."""
    started: list[RedisServer] = []
    try:
        for lane in range(lanes):
            started.append(RedisServer(data_dir=base / f"redis-{lane}").start())
        yield [server.url for server in started]
    finally:
        for server in started:
            server.stop()


def _count_all(valgrind: str, urls: list[str], warmup: int, decisions: int, out_dir: Path) -> list[dict[str, Any]]:
    """Every workload's two runs under one cachegrind; each run's JSON line with its ``instructions`` added."""
    command = [
        valgrind, "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out_dir}/cg.%p",
        f"--log-file={out_dir}/valgrind.%p.log", sys.executable, "-m", "bench.count_workload",
        "--warmup", str(warmup), "--decisions", str(decisions),
        *(arg for url in urls for arg in ("--redis-url", url)), *WORKLOADS,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    # A timeout far past a default run's 80 to 95 s: a hung run fails the section instead of the whole bench.
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise CountError(f"the count's workloads exited {done.returncode}: {done.stderr[-3000:]}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    for line in lines:
        line["instructions"] = read_instructions((out_dir / f"cg.{line['pid']}").read_text(encoding="utf-8"))
    return lines


def _trace(url: str) -> dict[str, Any]:
    """The trace count of one cold decision (:mod:`bench.count_trace`), run without valgrind on ``url``."""
    command = [sys.executable, "-m", "bench.count_trace", "--redis-url", url]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise CountError(f"the trace count exited {done.returncode}: {done.stderr[-3000:]}")
    trace: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return trace


def run(warmup: int, decisions: int, lanes: int | None = None) -> dict[str, Any]:
    """Every workload with ``warmup`` and with ``warmup + decisions`` decisions, ``lanes`` runs at a time (one
    per core by default, at most 2); the figures of :func:`summarize`, the trace count of one cold decision
    (:mod:`bench.count_trace`) and the run's settings."""
    valgrind = valgrind_binary()
    if valgrind is None:
        raise CountError(VALGRIND_MISSING)
    lanes = lanes or min(2, os.cpu_count() or 1)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-count-") as tmp, _servers(lanes, Path(tmp)) as urls:
        lines = _count_all(valgrind, urls, warmup, decisions, Path(tmp))
        trace = _trace(urls[0])
    counts = {
        (line["workload"], line["decisions"]): Count(line["instructions"], line["script_calls"]) for line in lines
    }
    runs = {name: (counts[name, warmup], counts[name, warmup + decisions]) for name in WORKLOADS}
    return {
        "warmup": warmup,
        "decisions": decisions,
        "lanes": lanes,
        "quotas_settings": COUNTED_QUOTAS,
        "valgrind": subprocess.run([valgrind, "--version"], capture_output=True, text=True).stdout.strip(),
        "seconds": round(time.monotonic() - started, 1),
        "rows": summarize(runs, decisions),
        "trace": trace,
    }
