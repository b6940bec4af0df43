"""Leaky-bucket shaping sleeps inside the request: one process holds only so much of it."""

from __future__ import annotations

import json
import threading

import pytest
from rest_framework.test import APIClient

from quotas.runtime.shaping import ShapingBudget
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
    """No size captured at import: the process's budget (its runtime's) starts as full as the settings say,
    and after a settings change (the engine is rebuilt) is full again at the new size."""
    from quotas.engine import default_engine

    settings.QUOTAS = {**settings.QUOTAS, "SHAPING_DELAY_BUDGET": 3.0, "SHAPING_DELAY_SHARE": 0.25}
    assert default_engine.runtime().shaping.take(2.5, now=50.0) == 0
    assert default_engine.runtime().shaping.take(1.0, now=50.0) > 0
    settings.QUOTAS = {**settings.QUOTAS, "SHAPING_DELAY_BUDGET": 0.2}
    assert default_engine.runtime().shaping.take(0.3, now=50.0) == float("inf")
    assert default_engine.runtime().shaping.take(0.2, now=50.0) == 0


def test_a_client_holds_at_most_its_share_of_the_budget(settings):
    """Alone, a client may hold SHAPING_CLIENT_SHARE (half) of the budget; once another holds some, each at most
    a third, and the two together two thirds, so that a third client still finds room."""
    settings.QUOTAS = {
        **settings.QUOTAS, "SHAPING_DELAY_BUDGET": 1.0, "SHAPING_DELAY_SHARE": 0.25, "SHAPING_CLIENT_SHARE": 0.5
    }  # fmt: skip
    budget = ShapingBudget()
    assert budget.take(0.3, "{s.1}", now=100.0) == 0
    # 0.2 s of its half left; alone, what it holds drains at the whole refill: 0.4 s until 0.3 s fits.
    assert budget.take(0.3, "{s.1}", now=100.0) == pytest.approx(0.1 / 0.25)
    assert budget.take(0.6, "{s.1}", now=100.0) == float("inf")  # more than its whole share: never
    assert budget.take(0.5, "{s.2}", now=100.0) > 0  # past a third, with another client holding some
    assert budget.take(0.3, "{s.2}", now=100.0) == 0  # the refused asks spent nothing
    assert budget.take(0.3, "{s.3}", now=100.0) > 0  # 0.6 held of a 0.75 cap for three: 0.15 left
    assert budget.take(0.15, "{s.3}", now=100.0) == 0
    assert budget.remembered_clients() == ["{s.1}", "{s.2}", "{s.3}"]


@pytest.mark.parametrize("clients", [3, 5, 20])
def test_no_client_starves_the_others(settings, clients):
    """Clients that each ask for as much as they can, one after another, never use the whole budget: the next
    one always gets a delay, and once the budget has refilled each holds about an equal share."""
    settings.QUOTAS = {
        **settings.QUOTAS, "SHAPING_DELAY_BUDGET": 1.0, "SHAPING_DELAY_SHARE": 0.25, "SHAPING_CLIENT_SHARE": 0.5
    }  # fmt: skip
    budget = ShapingBudget()
    granted: dict[int, float] = {}
    for n in range(clients):  # each takes what it can, 0.001 s at a time, with no refill in between
        granted[n] = 0.0
        while budget.take(0.001, f"{{s.{n}}}", now=100.0) == 0:
            granted[n] += 0.001
        assert granted[n] > 0, f"client {n} starved"
    # Everyone keeps asking while the budget refills: the shares even out.
    for step in range(1, 4001):
        for n in range(clients):
            budget.take(0.001, f"{{s.{n}}}", now=100.0 + step * 0.01)
    held = budget._held
    fair = 1.0 / (clients + 1)
    assert max(held.values()) <= fair + 0.002
    assert min(held.values()) >= fair - 0.01


def test_without_a_client_only_the_process_budget_counts(settings):
    settings.QUOTAS = {**settings.QUOTAS, "SHAPING_DELAY_BUDGET": 1.0, "SHAPING_CLIENT_SHARE": 0.5}
    budget = ShapingBudget()
    assert budget.take(0.9, now=100.0) == 0


def test_clients_remembered_stay_bounded(settings, monkeypatch):
    """Only clients holding budget are kept; past MAX_CLIENTS of them a new client waits until some drain."""
    from quotas.runtime import shaping

    monkeypatch.setattr(shaping, "MAX_CLIENTS", 3)
    settings.QUOTAS = {**settings.QUOTAS, "SHAPING_DELAY_BUDGET": 100.0, "SHAPING_DELAY_SHARE": 1.0}
    budget = ShapingBudget()
    for n in range(3):
        assert budget.take(1.0, f"{{s.{n}}}", now=100.0) == 0
    assert budget.take(1.0, "{s.9}", now=100.0) > 0
    assert len(budget.remembered_clients()) == 3
    # Three seconds later all three have drained (one second each at the whole refill): room for others.
    assert budget.take(1.0, "{s.9}", now=103.0) == 0
    assert budget.remembered_clients() == ["{s.9}"]


def test_retry_after_is_the_sooner_of_the_budget_and_the_drained_bucket():
    from quotas.runtime.shaping import retry_after

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
    from quotas.engine import default_engine

    default_engine.runtime().guard.usage.flush_usage()
    totals = usage_totals(redis_client)
    assert totals["a"] == 1 + codes.count(200)
    assert totals["dc"] == len(refused)


@pytest.mark.redis
def test_one_client_saturating_shaping_leaves_room_for_another(settings):
    """One tenant's shaped requests spend its share of the process's budget, then are refused
    (shaping_capacity); another tenant's shaped requests are still delayed and served, not refused.

    Both are on a 20/s leaky bucket, so each request sent right after the
    previous one is held 0.05 s. The budget is 0.6 s of sleep that
    practically never refills: the first client gets 0.3 s of it (its half),
    the second what keeps a third free for a client arriving next (0.1 s).
    Each hold is a sleep on the engine's clock, which stands still between
    requests (on the real clock, a request slowed by a busy machine was held
    less, and the first client was never refused).
    """
    settings.QUOTAS = {
        **settings.QUOTAS, "SHAPING_DELAY_BUDGET": 0.6, "SHAPING_DELAY_SHARE": 0.01, "SHAPING_CLIENT_SHARE": 0.5
    }  # fmt: skip
    plan = PlanFactory(slug="shaped", is_default=True)
    EndpointLimitFactory(plan=plan, name="smooth", rates="20/s", algorithm="leaky_bucket", burst=50, max_delay=1.0)
    greedy, other = issue_key(plan=plan), issue_key(plan=plan)
    api = APIClient()

    def send(key: str):
        return api.get("/api/demo/ping", HTTP_X_API_KEY=key)

    reasons = []
    for _ in range(10):  # the greedy client sends until the process stops shaping it
        r = send(greedy)
        reasons.append(json.loads(r.content).get("reason") if r.status_code == 429 else r.status_code)
        if r.status_code == 429:
            break
    assert reasons[-1] == "shaping_capacity"
    assert reasons[:-1].count(200) >= 2  # its first, undelayed, and at least one delayed request

    # Two delayed requests of another client after that: each fits what the first client left.
    for _ in range(3):
        r = send(other)
        assert r.status_code == 200, r.content
    # And a third client's short delay still fits: two clients never use the whole budget up.
    third = issue_key(plan=plan)
    for _ in range(2):
        r = send(third)
        assert r.status_code == 200, r.content
