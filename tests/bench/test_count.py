"""Section 13 of the bench (instructions per decision under cachegrind): its arithmetic, and its workload program
run without valgrind against the tests' redis-server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.count import Count, per_decision, read_instructions, summarize

ROOT = Path(__file__).resolve().parent.parent.parent

#: The head of a cachegrind out file (valgrind 3.19, --cache-sim=no), its per-function lines cut.
OUT_FILE = """desc: I1 cache:         32768 B, 64 B, 8-way associative
cmd: python -m bench.count_workload
events: Ir
fl=???
fn=0x0000000000001100
0 12
summary: 3010495124
"""


def test_the_total_is_the_summary_in_the_ir_column():
    """The instruction total is read from ``summary:``, in the column the ``events:`` line gives Ir."""
    assert read_instructions(OUT_FILE) == 3_010_495_124
    assert read_instructions("events: Dr Ir\nsummary: 7 42\n") == 42


def test_an_out_file_without_a_summary_is_an_error():
    """A truncated out file (valgrind killed) fails the section rather than counting nothing."""
    with pytest.raises(RuntimeError, match="no summary"):
        read_instructions("events: Ir\nfn=main\n0 5\n")


def test_per_decision_is_the_difference_over_the_added_decisions():
    """(Ir of W + N decisions - Ir of W) / N: the setup both runs share cancels out."""
    assert per_decision(3_000_000_000, 3_540_000_000, 1000) == 540_000


def test_own_is_minus_the_baseline_and_the_ratio_is_to_the_matching_limits_row():
    """Own subtracts the no-throttle row; cold rows are divided by limits' one hit(), busy rows by its busy row;
    script calls are the long run's over N."""
    n = 1000
    setup = 3_000_000_000

    def runs(per_decision: int, calls: int = 0) -> tuple[Count, Count]:
        return Count(setup, 0), Count(setup + per_decision * n, calls)

    rows = summarize(
        {
            "no_throttle": runs(500_000),
            "limits_1": runs(750_000, calls=n),
            "quota_1": runs(1_000_000, calls=n),
            "limits_busy": runs(700_000, calls=n),
            "quota_1_busy": runs(800_000, calls=20),
        },
        n,
    )
    assert "own" not in rows["no_throttle"]
    assert rows["quota_1"]["instructions_per_decision"] == 1_000_000
    assert rows["quota_1"]["own"] == 500_000
    assert rows["quota_1"]["own_vs_limits"] == 2.0  # 500,000 / limits' 250,000
    assert rows["quota_1_busy"]["own_vs_limits"] == 1.5  # 300,000 / limits' busy 200,000
    assert rows["limits_1"]["own_vs_limits"] == 1.0
    assert rows["quota_1_busy"]["script_calls_per_decision"] == 0.02
    assert rows["limits_busy"]["script_calls_per_decision"] == 1.0


@pytest.mark.slow  # starts the bench program: six processes, each setting Django up
def test_the_workload_program_runs_each_workload_twice(redis_server):
    """Without valgrind, the program forks a W and a W + N run per workload; every request is answered 200 and
    the W + N run counts the script calls of its last N requests: one per decision for QuotaThrottle and one
    history write at the tick after them, one per hit() for limits, none without a throttle."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    command = [sys.executable, "-m", "bench.count_workload", "--warmup", "2", "--decisions", "3",
               "--redis-url", redis_server.url, "no_throttle", "quota_1", "limits_5"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    calls = {(line["workload"], line["decisions"]): line["script_calls"] for line in lines}
    assert calls == {
        ("no_throttle", 5): 0, ("no_throttle", 2): 0,
        ("quota_1", 5): 4, ("quota_1", 2): 0,  # 3 decisions, then the history of their clients written
        ("limits_5", 5): 15, ("limits_5", 2): 0,
    }  # fmt: skip
    assert all(line["failed"] == 0 for line in lines)
    assert len({line["pid"] for line in lines}) == 6  # each run a process of its own, as cachegrind counts them


@pytest.mark.slow  # starts the trace program, which sets Django up
def test_the_trace_counts_the_product_code_of_one_cold_decision(redis_server):
    """The trace program counts one new user's decision from QuotaThrottle.allow_request on: product modules only
    (the throttle and the store among them, no Django or redis-py file), each function once, at least one call
    per function."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    command = [sys.executable, "-m", "bench.count_trace", "--warmup", "3", "--redis-url", redis_server.url]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout.splitlines()[-1])
    visited = trace["visited"]
    assert "quotas/drf/throttling.py" in visited
    assert "quotas/store/redis_store.py" in visited
    assert all(path.split("/")[0] in {"quotas", "plans", "usage", "adaptive"} for path in visited)
    assert trace["modules"] == len(visited)
    assert trace["functions"] == sum(len(names) for names in visited.values())
    assert trace["calls"] >= trace["functions"]
    assert not any(name.startswith("<") for names in visited.values() for name in names)
