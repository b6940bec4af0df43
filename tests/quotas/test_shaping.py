"""Leaky-bucket shaping sleeps inside the request: one process holds only so much of it."""

from __future__ import annotations

import json
import threading

import pytest
from rest_framework.test import APIClient

from quotas.engine.shaping import ShapingBudget
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.usage_counters import usage_totals

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def test_budget_grants_a_burst_then_its_share_of_time(settings):
    settings.QUOTAS = {**settings.QUOTAS, "SHAPING_DELAY_BUDGET": 1.0, "SHAPING_DELAY_SHARE": 0.25}
    budget = ShapingBudget()
    assert budget.take(0.6, now=100.0) == 0
    assert budget.take(0.6, now=100.0) == pytest.approx((0.6 - 0.4) / 0.25)  # 0.8 s until it fits
    assert budget.take(0.6, now=100.81) == 0
    assert budget.take(2.0, now=200.0) == float("inf")  # longer than the whole budget: never


def test_budget_reads_its_size_when_first_used(settings):
    """No size captured at import: the process's budget starts as full as the settings say, and after a
    settings change (the engine is rebuilt) is full again at the new size."""
    from quotas.engine import shaping

    settings.QUOTAS = {**settings.QUOTAS, "SHAPING_DELAY_BUDGET": 3.0, "SHAPING_DELAY_SHARE": 0.25}
    assert shaping.budget.take(2.5, now=50.0) == 0
    assert shaping.budget.take(1.0, now=50.0) > 0
    settings.QUOTAS = {**settings.QUOTAS, "SHAPING_DELAY_BUDGET": 0.2}
    assert shaping.budget.take(0.3, now=50.0) == float("inf")
    assert shaping.budget.take(0.2, now=50.0) == 0


def test_retry_after_is_the_sooner_of_the_budget_and_the_drained_bucket():
    from quotas.engine.shaping import retry_after

    assert retry_after(delay=0.4, wait=30.0) == 1
    assert retry_after(delay=1.5, wait=float("inf")) == 2
    assert retry_after(delay=5.0, wait=2.2) == 3


@pytest.mark.slow
def test_delays_beyond_the_process_budget_are_refused_with_429_and_taken_back(settings, redis_client):
    """Threads of one process asking for shaping delays: what does not fit is a 429, never a sleep.

    The refused requests are given back to the bucket and counted as refused
    for capacity ("dc"), not as admitted.
    """
    settings.QUOTAS = {**settings.QUOTAS, "SHAPING_DELAY_BUDGET": 0.5, "SHAPING_DELAY_SHARE": 0.01}
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="smooth", rates="4/s", algorithm="leaky_bucket", burst=20, max_delay=2.0)
    key = issue_key(plan=plan)
    APIClient().get("/api/demo/ping", HTTP_X_API_KEY=key)  # rules and key loaded; no delay for the first
    responses = []

    def send():
        responses.append(APIClient().get("/api/demo/ping", HTTP_X_API_KEY=key))

    threads = [threading.Thread(target=send) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    codes = sorted(r.status_code for r in responses)
    # Delays of 0.25, 0.5, 0.75 ... s are asked for; 0.5 s of sleep in all fits this process.
    assert codes.count(200) in (1, 2)
    refused = [r for r in responses if r.status_code == 429]
    assert refused
    for r in refused:
        # Retry once the bucket has drained that far (at most max_delay), not once this process has budget.
        assert 1 <= int(r["Retry-After"]) <= 2
        assert r["Content-Type"] == "application/problem+json"
        assert json.loads(r.content)["reason"] == "shaping_capacity"
    from quotas.engine.runtime import get_engine

    get_engine().flush_usage()
    totals = usage_totals(redis_client)
    assert totals["a"] == 1 + codes.count(200)
    assert totals["dc"] == len(refused)
