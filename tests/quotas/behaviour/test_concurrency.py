"""Exactness under real concurrency (OS processes sharing a Redis, threads sharing any store), clock skew, and
Redis round trips per decision."""

from __future__ import annotations

import multiprocessing
import threading
import time
from unittest import mock

import pytest
from rest_framework.test import APIClient

from quotas.engine import default_engine
from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.script_calls import script_calls

EXACT = ["fixed_window", "sliding_window_log", "token_bucket", "leaky_bucket", "sliding_window_counter"]
PROCESSES = 8
T0 = 1_700_000_040.0


def _hammer(windows, now, attempts, barrier, results, skew=0.0):
    """One OS process: wait for the others, then fire `attempts` decisions."""
    real_time = time.time
    with mock.patch("time.time", side_effect=lambda: real_time() + skew):
        runtime = default_engine.runtime()
        barrier.wait()
        results.put(sum(runtime.guard.decide("{hammered}", windows, now=now).allowed for _ in range(attempts)))


def _run(windows, now, attempts, skews):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(len(skews)), ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(windows, now, attempts, barrier, results, s)) for s in skews]
    for p in procs:
        p.start()
    counts = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=10)
        assert p.exitcode == 0
    return sum(counts)


@pytest.mark.redis_only  # OS processes share a Redis server (each would have its own memory store)
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", EXACT)
def test_eight_processes_admit_exactly_the_limit(runtime, algorithm):
    """8 processes x 40 attempts against 100/min: exactly 100 admitted, every run.

    Time is fixed so that the buckets cannot refill and the windows cannot
    roll over during the test; the sliding window counter is exact here too
    because all requests fall in one window.
    """
    windows = LimitRule(id="conc", name="conc", rates=parse_rates("100/min"), algorithm=algorithm).windows
    assert _run(windows, T0, 40, [0.0] * PROCESSES) == 100


@pytest.mark.redis_only  # OS processes share a Redis server (each would have its own memory store)
@pytest.mark.slow
def test_eight_processes_on_the_server_clock(runtime):
    """The same with Redis's own clock: the sliding log stays exact."""
    windows = LimitRule(id="conc", name="conc", rates=parse_rates("100/min"), algorithm="sliding_window_log").windows
    assert _run(windows, None, 40, [0.0] * PROCESSES) == 100


@pytest.mark.redis_only  # OS processes share a Redis server (each would have its own memory store)
@pytest.mark.slow
def test_skewed_application_clocks_share_one_limit(runtime):
    """Two processes whose clocks differ by 5 minutes enforce one limit exactly."""
    windows = LimitRule(id="skew", name="skew", rates=parse_rates("50/min"), algorithm="sliding_window_log").windows
    assert _run(windows, None, 40, [0.0, 300.0]) == 50


@pytest.mark.parametrize("algorithm", EXACT)
def test_eight_threads_admit_exactly_the_limit(runtime, algorithm):
    """8 threads x 40 attempts against 100/min on one engine: exactly 100 admitted (on the memory store, one
    lock makes each decision atomic, as Redis runs one script at a time)."""
    windows = LimitRule(id="conc", name="conc", rates=parse_rates("100/min"), algorithm=algorithm).windows
    barrier, counts = threading.Barrier(PROCESSES), []

    def hammer() -> None:
        barrier.wait()
        counts.append(sum(runtime.guard.decide("{hammered}", windows, now=T0).allowed for _ in range(40)))

    threads = [threading.Thread(target=hammer) for _ in range(PROCESSES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sum(counts) == 100


@pytest.mark.redis_only  # counts script calls in Redis's command statistics
@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_one_script_call_per_decision_and_none_for_a_remembered_client(redis_client, no_allowances, set_quotas):
    """Redis command statistics: one EVALSHA per request, none while refused locally (allowances off: they
    admit a busy client's requests with no call at all, tests/quotas/test_allowances.py). The poller is off:
    its writes (the history's top clients) are script calls too, and a busy machine can make the test outlast
    its interval."""
    set_quotas(RULES_CHECK_INTERVAL=0)
    plan = PlanFactory(slug="free", is_default=True)
    for i in range(5):
        EndpointLimitFactory(plan=plan, name=f"l{i}", rates=f"{20 + i}/min; 1000/day", algorithm="token_bucket")
    key = issue_key(plan=plan)
    client = APIClient()
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200  # loads rules and the script
    redis_client.config_resetstat()
    for _ in range(19):
        assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200
    assert script_calls(redis_client) == 19
    codes = [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(100)]
    assert codes == [429] * 100
    assert script_calls(redis_client) == 20  # only the first refusal reached Redis
