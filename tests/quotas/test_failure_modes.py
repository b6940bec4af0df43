"""Redis outages: the local fallback, the circuit breaker, recovery, and usage that is never lost."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from quotas.engine import default_engine
from quotas.store.usage_batches import replay_spool, spool_dir
from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory, issue_key
from tests.script_calls import script_calls
from tests.store_client import client_of
from tests.usage_counters import usage_totals
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="10/min", algorithm="fixed_window")
    return plan


@pytest.fixture
def outage(redis_server):
    """Stop the test's redis-server; always start it again."""

    class Outage:
        def begin(self):
            redis_server.stop()

        def end(self):
            if redis_server.process is None:
                redis_server.start()

    outage = Outage()
    yield outage
    outage.end()


def test_local_mode_enforces_this_processs_share(free, outage, settings):
    """Default mode: while Redis is down each process allows its share (LOCAL_SHARE) of the limit."""
    settings.QUOTAS = {**settings.QUOTAS, "LOCAL_SHARE": 0.3}
    client, key = APIClient(), issue_key(plan=free)
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200  # rules loaded, Redis up
    outage.begin()
    codes = [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(6)]
    assert codes == [200, 200, 200, 429, 429, 429]  # 10/min x 0.3 = 3 here
    response = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert response["X-RateLimit-Limit"] == "3"
    assert default_engine.runtime().guard.breaker.is_open


def test_breaker_spares_requests_the_failed_attempt(free, outage):
    """After the first failure the breaker is open: decisions do not try Redis at all."""
    client, key = APIClient(), issue_key(plan=free)
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    outage.begin()
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    runtime = default_engine.runtime()
    assert runtime.guard.breaker.is_open
    runtime.guard.breaker.failure()  # as if a trial just failed: the next waits for the probe interval
    assert not runtime.guard.breaker.allow()


def test_the_breakers_probe_interval_follows_the_engines_clock(free, outage, quota_clock):
    """Whether a decision tries Redis while the breaker is open follows the engine's clock (a test's, moved by the
    test), not how fast the machine ran: on the real monotonic clock a loaded machine let a trial through in some
    runs and not in others, and the money machine's Redis examples could not be replayed."""
    client, key = APIClient(), issue_key(plan=free)
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    outage.begin()
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    breaker = default_engine.runtime().guard.breaker
    assert breaker.is_open
    breaker.failure()  # a trial just failed
    assert not breaker.allow()
    quota_clock.advance(breaker.probe_interval)
    assert breaker.allow()  # one trial
    assert not breaker.allow()


@pytest.mark.slow
def test_decisions_return_to_redis_within_two_seconds_of_recovery(free, outage, redis_client):
    client, key = APIClient(), issue_key(plan=free)
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    outage.begin()
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    outage.end()
    redis_client.config_resetstat()

    def decided_in_redis() -> int:
        client.get("/api/demo/ping", HTTP_X_API_KEY=key)
        return script_calls(redis_client)

    assert wait_until(decided_in_redis, 2.0), "decisions did not return to Redis within 2 s"
    assert not default_engine.runtime().guard.breaker.is_open


def test_usage_counted_during_an_outage_reaches_redis_after_it(free, outage, redis_client, settings):
    settings.QUOTAS = {**settings.QUOTAS, "LOCAL_SHARE": 0.5}
    client, key = APIClient(), issue_key(plan=free)
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    outage.begin()
    codes = [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(12)]
    outage.end()
    runtime = default_engine.runtime()
    runtime.tick()  # what the poller thread does every second
    # The test's redis-server keeps nothing on disk, so only what the process held is there now.
    totals = usage_totals(redis_client)
    assert totals["a"] == codes.count(200) == 5
    assert totals["dr"] == codes.count(429) == 7


def test_a_process_exiting_during_an_outage_spools_its_usage(free, outage, redis_client):
    client, key = APIClient(), issue_key(plan=free)
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    outage.begin()
    for _ in range(4):
        client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    runtime = default_engine.runtime()
    assert not runtime.guard.usage.flush_usage(spool_on_failure=True)  # as at exit: Redis is down, so spool it
    assert len(list(spool_dir().glob("*.spool"))) == 1
    outage.end()
    assert replay_spool(redis_client) == 1
    assert not list(spool_dir().iterdir())
    assert usage_totals(redis_client)["a"] == 4  # the restarted test Redis kept nothing else


def test_closed_mode_refuses_with_503(free, outage, settings):
    settings.QUOTAS = {**settings.QUOTAS, "FAILURE_MODE": "closed"}
    client, key = APIClient(), issue_key(plan=free)
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    outage.begin()
    response = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"


def test_healthz_says_which_mode_this_process_is_in(free, outage):
    client, key = APIClient(), issue_key(plan=free)
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert client.get("/healthz").json()["engine"]["mode"] == "normal"
    outage.begin()
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    client.force_login(UserFactory(is_staff=True))  # the details are for operators
    body = client.get("/healthz").json()
    assert body["engine"]["mode"] == "fallback"
    assert body["engine"]["breaker_open"] is True
    assert body["redis"]["topology"] == "standalone"


@pytest.mark.parametrize("mode", ["redis", "local"])
def test_head_requests_count_toward_limits_on_get(db, outage, settings, mode):
    """Django serves HEAD with the GET handler, so a GET-only limit counts HEAD too, in both modes."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="reads", rates="4/min", algorithm="fixed_window", methods="GET")
    settings.QUOTAS = {**settings.QUOTAS, "LOCAL_SHARE": 1.0}
    client, key = APIClient(), issue_key(plan=plan)
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key)["X-RateLimit-Remaining"] == "3"
    if mode == "local":
        outage.begin()
    # The local fallback starts this process's count afresh: 4 more fit there.
    codes = [client.head("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(5)]
    assert codes == ([200] * 3 + [429] * 2 if mode == "redis" else [200] * 4 + [429])
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 429


def test_the_fallback_spends_only_its_share_of_what_remained_of_a_budget(runtime, outage, settings):
    """90 of a 100 budget spent through Redis: during the outage this process grants LOCAL_SHARE x 10, not x 100."""
    from quotas.formats.rates import Rate
    from quotas.rules.limits import LimitRule

    settings.QUOTAS = {**settings.QUOTAS, "LOCAL_SHARE": 0.5}
    default_engine.reset()
    runtime = default_engine.runtime()
    budget = LimitRule(id="b1", name="day-budget", rates=(Rate(100, 86400),), algorithm="budget", period="day")
    windows = list(budget.windows)
    assert runtime.guard.decide("{spender}", windows, cost_micros=90).allowed
    outage.begin()
    granted = sum(runtime.guard.decide_locally("{spender}", windows, None, 1, None).allowed for _ in range(20))
    assert granted == 5  # 0.5 x the 10 that remained
    # A client Redis never saw this period: the share of the whole budget, as before.
    assert sum(runtime.guard.decide_locally("{stranger}", windows, None, 10, None).allowed for _ in range(20)) == 5


def test_a_script_error_answers_that_request_alone_and_never_opens_the_breaker(free, redis_client, caplog):
    """A key of the wrong type (a bug, a stray write) is not an outage: other clients stay on Redis."""
    from quotas import metrics
    from quotas.contract.keys import client_tag
    from tests.factories import SubscriptionFactory

    runtime = default_engine.runtime()
    broken_sub = SubscriptionFactory(plan=free)
    bucket = runtime.store.keys_of(client_tag("s", str(broken_sub.pk))).bucket
    healthy_sub = SubscriptionFactory(plan=free)
    while runtime.store.keys_of(client_tag("s", str(healthy_sub.pk))).bucket == bucket:  # another bucket's client
        healthy_sub = SubscriptionFactory(plan=free)
    broken, healthy = issue_key(broken_sub), issue_key(healthy_sub)
    client = APIClient()
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=healthy).status_code == 200
    redis_client.set(bucket, "not a hash")
    before = metrics.REGISTRY.get_sample_value("quota_redis_errors_total", {"operation": "script"}) or 0
    response = client.get("/api/demo/ping", HTTP_X_API_KEY=broken)
    assert response.status_code == 200  # the failure mode ("local") answered this one request
    assert not runtime.guard.breaker.is_open
    assert metrics.REGISTRY.get_sample_value("quota_redis_errors_total", {"operation": "script"}) == before + 1
    assert "decision script failed" in caplog.text
    ok = client.get("/api/demo/ping", HTTP_X_API_KEY=healthy)
    assert ok["X-RateLimit-Remaining"] == "8"  # still decided in Redis: 10/min, two spent


def metered_key(budget: str) -> tuple[APIClient, str]:
    """A client and the key of a subscriber on a plan priced 0.01 on /t/priced with a daily ``budget``, its
    rules loaded while Redis is up."""
    from decimal import Decimal

    from plans.models import CostBudget

    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal(budget))
    client, key = APIClient(raise_request_exception=False), issue_key(plan=plan)
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200
    return client, key


def test_during_an_outage_usage_records_actual_costs_and_a_failed_view_releases_its_estimate(outage):
    """The local failure mode reconciles too: estimated 0.02, cost 0.005, then a view that fails (500) after
    an estimate of 0.02: once Redis is back, usage holds 0.005, not the estimates' 0.04 (this test's Redis
    comes back empty: only what was counted during the outage is there)."""
    from decimal import Decimal

    from quotas.formats.money import to_micros

    client, key = metered_key("1.00")
    outage.begin()
    assert client.get("/t/priced?est=0.02&actual=0.005", HTTP_X_API_KEY=key).status_code == 200
    assert client.get("/t/priced?est=0.02&fail=1", HTTP_X_API_KEY=key).status_code == 500
    outage.end()
    runtime = default_engine.runtime()
    wait_until(runtime.guard.usage.flush_usage, 10, every=0.2)  # the breaker may still be open
    assert usage_totals(client_of(default_engine.runtime()))["c"] == to_micros(Decimal("0.005"))


def test_during_an_outage_a_budget_counts_actual_costs(outage, set_quotas):
    """Redis down, the local failure mode holding the whole budget (LOCAL_SHARE 1): each request is estimated
    at 0.05 but costs 0.01, so the 0.10 budget admits while what was actually spent plus the next estimate
    fits: six requests (0.00 ... 0.05 spent before each), not the two the estimates alone would allow. A view
    that fails gives its estimate back, so it costs no room either."""
    set_quotas(LOCAL_SHARE=1.0)
    client, key = metered_key("0.10")
    outage.begin()
    assert client.get("/t/priced?est=0.05&fail=1", HTTP_X_API_KEY=key).status_code == 500
    codes = [client.get("/t/priced?est=0.05&actual=0.01", HTTP_X_API_KEY=key).status_code for _ in range(8)]
    assert codes == [200] * 6 + [429] * 2
    assert default_engine.runtime().guard.breaker.is_open  # all of it decided in this process
