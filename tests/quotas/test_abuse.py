"""Abuse protection in the engine: escalation bans and concurrency leases."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import time

import pytest

from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
from quotas.rules.snapshot import ban_policy_spec

T0 = 1_700_000_040.0
POLICY = ban_policy_spec(3, 10, (60, 600))


def windows(algorithm="fixed_window", rates="1/min", **kwargs):
    return LimitRule(id="l", name="l", rates=parse_rates(rates), algorithm=algorithm, **kwargs).windows


def refuse_until_banned(runtime, at, tag="{c}"):
    results = [runtime.guard.decide(tag, windows(), now=at, ban_policy=POLICY) for _ in range(4)]
    return results[-1]


def test_repeated_refusals_ban_the_client(runtime):
    """More than 3 refusals within 10 s: banned for 60 s, refused without reading the limits."""
    assert runtime.guard.decide("{c}", windows(), now=T0, ban_policy=POLICY).allowed
    last = refuse_until_banned(runtime, T0 + 1)
    assert last.ban_started
    assert last.retry_after == 60
    banned = runtime.guard.decide("{c}", windows(), now=T0 + 2, ban_policy=POLICY)
    assert banned.banned
    # The limits were not read: each window only shows nothing left until the ban ends (for the headers).
    assert banned.denying_states() == []
    assert [(s.remaining, s.reset_us) for s in banned.states] == [(0, 59_000_000)] * len(banned.states)
    assert banned.retry_after == 59


def test_bans_expire_on_their_own(runtime):
    runtime.guard.decide("{c}", windows(), now=T0, ban_policy=POLICY)
    refuse_until_banned(runtime, T0 + 1)
    assert runtime.guard.decide("{c}", windows(), now=T0 + 61, ban_policy=POLICY).allowed  # a new minute, ban over


def test_bans_grow_on_repeat_and_are_forgotten_after_a_day(runtime):
    runtime.guard.decide("{c}", windows(), now=T0, ban_policy=POLICY)
    assert refuse_until_banned(runtime, T0 + 1).retry_after == 60
    runtime.guard.decide("{c}", windows(), now=T0 + 120, ban_policy=POLICY)
    assert refuse_until_banned(runtime, T0 + 121).retry_after == 600  # second strike
    later = T0 + 2 * 86400
    runtime.guard.decide("{c}", windows(), now=later, ban_policy=POLICY)
    assert refuse_until_banned(runtime, later + 1).retry_after == 60  # strikes forgotten


def test_few_refusals_do_not_ban(runtime):
    runtime.guard.decide("{c}", windows(), now=T0, ban_policy=POLICY)
    results = [runtime.guard.decide("{c}", windows(), now=T0 + 1 + i * 4, ban_policy=POLICY) for i in range(5)]
    assert not any(r.ban_started or r.banned for r in results)  # never more than 3 within 10 s


def test_without_a_policy_nobody_is_banned(runtime):
    results = [runtime.guard.decide("{c}", windows(), now=T0) for _ in range(50)]
    assert not any(r.ban_started or r.banned for r in results)


def test_concurrency_lease_is_taken_and_released(runtime):
    """At most 2 requests in flight; finishing one frees its slot."""
    cc = windows("concurrency", "2/30s")
    first = runtime.guard.decide("{c}", cc, request_id="r1", now=T0)
    second = runtime.guard.decide("{c}", cc, request_id="r2", now=T0)
    third = runtime.guard.decide("{c}", cc, request_id="r3", now=T0)
    assert (first.allowed, second.allowed, third.allowed) == (True, True, False)
    runtime.guard.settlement.release(first)
    assert runtime.guard.decide("{c}", cc, request_id="r4", now=T0 + 1).allowed


def test_concurrency_lease_runs_out(runtime):
    cc = windows("concurrency", "1/30s")
    runtime.guard.decide("{c}", cc, request_id="r1", now=T0)
    assert not runtime.guard.decide("{c}", cc, request_id="r2", now=T0 + 29).allowed
    assert runtime.guard.decide("{c}", cc, request_id="r3", now=T0 + 30.001).allowed


@pytest.mark.parametrize("second", ["sliding_window_log", "concurrency"])
def test_a_lease_and_another_own_key_window_in_one_decision_are_both_kept(runtime, redis_client, second):
    """A concurrency limit before a sliding log or a second lease: each admission is recorded in both.

    Two requests in flight out of 5, and the second window's limit of 2 then
    refuses the third; every key written carries the client's one {hash tag}.
    """
    both = windows("concurrency", "5/30s") + windows(second, "2/min")
    results = [runtime.guard.decide("{c}", both, request_id=f"r{i}", now=T0).allowed for i in range(3)]
    assert results == [True, True, False]
    keys = redis_client.keys("*")
    assert len({tag for key in keys for tag in re.findall(rb"\{[^}]*\}", key)}) == 1, keys
    assert all(b"{" in key for key in keys), keys
    sorted_sets = [redis_client.zcard(key) for key in keys if redis_client.type(key) == b"zset"]
    assert sorted_sets == [2, 2]  # r0 and r1 in each window's sorted set


def _hold_lease_then_hang(ready):
    from quotas.engine import default_engine

    decision = default_engine.runtime().guard.decide("{dying}", windows("concurrency", "1/2s"), request_id="worker-1")
    ready.send(decision.allowed)
    time.sleep(60)  # killed long before this ends


@pytest.mark.redis
@pytest.mark.slow
def test_a_killed_worker_gives_its_slot_back_after_the_lease(runtime):
    """A worker killed mid-request never releases; its lease is reclaimed when it runs out."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=_hold_lease_then_hang, args=(child,))
    worker.start()
    try:
        assert parent.recv() is True
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(timeout=10)
        cc = windows("concurrency", "1/2s")
        assert not runtime.guard.decide("{dying}", cc, request_id="next").allowed
        deadline = time.monotonic() + 5
        while not runtime.guard.decide("{dying}", cc, request_id="next").allowed:
            assert time.monotonic() < deadline, "the dead worker's lease was never reclaimed"
            time.sleep(0.1)
    finally:
        if worker.is_alive():
            worker.kill()


@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
class TestOverHTTP:
    """Escalation and concurrency as configured in the admin, seen over HTTP."""

    def test_a_flooding_client_is_banned_with_429_abnormal_usage(self):
        import json

        from rest_framework.test import APIClient

        from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

        plan = PlanFactory(slug="free", is_default=True, ban_threshold=3, ban_window=10, ban_durations="60,600")
        EndpointLimitFactory(plan=plan, name="global", rates="1/min", algorithm="fixed_window")
        client, key = APIClient(), issue_key(plan=plan)
        codes = [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(6)]
        assert codes == [200] + [429] * 5
        response = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
        body = json.loads(response.content)
        assert body["reason"] == "banned"
        assert body["type"].endswith("#abnormal-usage-detected")
        assert 55 <= int(response["Retry-After"]) <= 60
        # Every 429 of a ban says RateLimit too: nothing left until the ban ends (draft: RateLimit on every 429).
        assert response["RateLimit-Policy"] == '"global";q=1;w=60'
        remaining, reset = re.fullmatch(r'"global";r=(\d+);t=(\d+)', response["RateLimit"]).groups()
        assert remaining == "0"
        assert abs(int(reset) - int(response["Retry-After"])) <= 1

    def test_concurrency_lease_is_released_after_the_response(self):
        from rest_framework.test import APIClient

        from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

        plan = PlanFactory(slug="free", is_default=True)
        EndpointLimitFactory(plan=plan, name="inflight", rates="1/30s", algorithm="concurrency")
        client, key = APIClient(), issue_key(plan=plan)
        # One at a time, each released when done: never refused.
        assert {client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(5)} == {200}


@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_bans_are_recorded_and_liftable_in_admin(quota_clock):
    """A ban shows in the admin; lifting it lets the client in at once."""
    from rest_framework.test import APIClient

    from plans.models import ClientBan
    from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory, issue_key

    plan = PlanFactory(slug="free", is_default=True, ban_threshold=2, ban_window=10, ban_durations="600")
    EndpointLimitFactory(plan=plan, name="global", rates="1/s", algorithm="fixed_window")
    client, key = APIClient(), issue_key(plan=plan)
    for _ in range(4):
        client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    ban = ClientBan.objects.get()
    assert ban.is_active
    assert ban.subscription is not None
    staff = APIClient()
    staff.force_login(UserFactory(username="admin", is_staff=True, is_superuser=True))
    listing = staff.get("/admin/quota_plans/clientban/?state=active")
    assert ban.client in listing.content.decode()
    quota_clock.advance(1.05)  # the 1/s window is free again; only the ban stands in the way
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 429
    staff.post("/admin/quota_plans/clientban/", {"action": "lift", "_selected_action": [ban.pk]})
    ban.refresh_from_db()
    assert ban.lifted_at is not None
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200
