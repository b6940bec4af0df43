"""A view listing several QuotaThrottle classes (DRF's Burst plus Sustained pattern) makes one decision.

The plan's limits and budgets are charged once, the one verdict is settled (estimate replaced by the actual
cost), and where no plan covers the client each class's own rate applies, all in that one decision.

A class that counts clients otherwise (its own ``get_cache_key``: per tenant) decides on its own, but the
request is still priced once: only the first decision charges the price and the budgets and counts the request
in usage; every decision is settled and every concurrency lease it took is released. A request a later class
refuses is withdrawn from the earlier decisions: charged nothing, and a period quota's unit and the alert level
its admission raised are given back (also in a period carried over from another BUDGET_TIME_ZONE).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import include, path
from rest_framework.test import APIClient

from plans.models import CostBudget, PeriodQuota
from quotas.engine import default_engine
from quotas.formats.money import to_micros
from quotas.signals import budget_threshold_crossed
from quotas.throttling import QuotaThrottle
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, issue_key
from tests.urls import PricedView
from tests.usage_counters import usage_totals

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


class BurstThrottle(QuotaThrottle):
    rate = "3/min"


class SustainedThrottle(QuotaThrottle):
    rate = "100/day"


class PricedBurstView(PricedView):
    """DRF's documented pattern with our throttle on the priced view (estimates from ?est=, reports ?actual=)."""

    throttle_classes = [BurstThrottle, SustainedThrottle]


class TenantThrottle(QuotaThrottle):
    """Counts the plan's limits per tenant (the X-Tenant header) rather than per subscriber."""

    def get_cache_key(self, request, view):
        return f"tenant:{request.headers.get('X-Tenant', 'acme')}"


class PricedTenantView(PricedView):
    """The plan's limits per subscriber and per tenant: two decisions on one request."""

    throttle_classes = [QuotaThrottle, TenantThrottle]


urlpatterns = [
    path("burst/", PricedBurstView.as_view()),
    path("tenant/", PricedTenantView.as_view()),
    path("", include("config.urls")),
]


@pytest.fixture
def metered(db):
    plan = PlanFactory(slug="metered")
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1"))
    return plan


def test_a_subscriber_is_charged_once_and_settled_once(metered, redis_client):
    """Price 0.01, then an estimate of 0.10 with an actual cost of 0.02: 0.03 spent, 2 requests counted."""
    api, key = APIClient(), issue_key(plan=metered)
    assert api.get("/burst/", HTTP_X_API_KEY=key).status_code == 200
    assert api.get("/burst/?est=0.10&actual=0.02", HTTP_X_API_KEY=key).status_code == 200
    totals = usage_totals(redis_client)
    assert totals["a"] == 2
    assert totals["c"] == to_micros(Decimal("0.03"))


def test_where_no_plan_covers_the_client_each_class_rate_applies_in_one_decision(redis_client):
    """Burst (3/min) refuses the fourth request; both classes' windows are in the one decision's headers."""
    api = APIClient()
    responses = [api.get("/burst/") for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    policy = responses[0]["RateLimit-Policy"]
    assert '"burstthrottle";q=3;w=60' in policy
    assert '"sustainedthrottle";q=100;w=86400' in policy
    assert usage_totals(redis_client)["a"] == 3  # each admitted request counted once


@pytest.fixture
def per_tenant(metered):
    """The metered plan (0.01 a request, a day budget of 1.00), three requests a minute and one request at a
    time (a lease of 30 s: a leaked lease shows as a 429 on the next request)."""
    EndpointLimitFactory(plan=metered, name="burst", scope="priced", rates="3/min")
    EndpointLimitFactory(plan=metered, name="inflight", scope="priced", rates="1/30s", algorithm="concurrency")
    return metered


def test_a_class_counting_per_tenant_does_not_charge_the_request_again(per_tenant, redis_client):
    """Price 0.01, then an estimate of 0.10 with an actual cost of 0.02: 0.03 spent and 2 requests counted,
    though two decisions were made on each; both settled, both leases released (the third is admitted)."""
    api, key = APIClient(), issue_key(plan=per_tenant)
    assert api.get("/tenant/", HTTP_X_API_KEY=key).status_code == 200
    assert api.get("/tenant/?est=0.10&actual=0.02", HTTP_X_API_KEY=key).status_code == 200
    totals = usage_totals(redis_client)
    assert totals["a"] == 2
    assert totals["c"] == to_micros(Decimal("0.03"))
    assert api.get("/tenant/", HTTP_X_API_KEY=key).status_code == 200  # no lease left behind


def test_a_request_refused_by_the_tenant_class_releases_the_first_decisions_lease(per_tenant):
    """Two subscribers of one tenant: the tenant's three requests a minute are spent, so the fourth is refused
    by the tenant class after the first class admitted it; that admission's lease is released with the 429, and
    the same subscriber's next request (another tenant) is admitted."""
    api = APIClient()
    first, second = issue_key(plan=per_tenant), issue_key(plan=per_tenant)
    for _ in range(3):
        assert api.get("/tenant/", HTTP_X_API_KEY=first).status_code == 200
    refused = api.get("/tenant/", HTTP_X_API_KEY=second)
    assert refused.status_code == 429
    assert '"burst";r=0' in refused["RateLimit"]  # the refusing decision's headers
    assert api.get("/tenant/", HTTP_X_API_KEY=second, HTTP_X_TENANT="globex").status_code == 200


def test_a_request_a_later_class_refuses_is_charged_nothing(per_tenant, redis_client):
    """The tenant's three requests a minute are spent by one subscriber; another subscriber's two requests are
    admitted (and priced) by the first class, then refused by the tenant class: they are charged nothing, in
    the budget or in usage (0.02 was charged for the two 429s), and counted as refused."""
    api = APIClient()
    first, second = issue_key(plan=per_tenant), issue_key(plan=per_tenant)
    for _ in range(3):
        assert api.get("/tenant/", HTTP_X_API_KEY=first).status_code == 200
    assert [api.get("/tenant/", HTTP_X_API_KEY=second).status_code for _ in range(2)] == [429, 429]
    default_engine.runtime().tick()  # what the poller does every second: the in-process usage written
    totals = usage_totals(redis_client)
    assert totals["c"] == to_micros(Decimal("0.03"))
    assert totals["a"] == 3
    assert totals["dr"] == 2
    spent = api.get("/api/v1/usage/current", HTTP_X_API_KEY=second).json()["budgets"][0]["spent"]
    assert Decimal(spent) == 0


STORES = [pytest.param("memory"), pytest.param("redis", marks=pytest.mark.redis)]


@pytest.fixture
def six_a_day(db):
    """A plan of 6 requests a day (a period quota on the priced scope) at 0.01 each; two of its subscribers'
    keys (the customer's, its neighbour's: both of one tenant, the tenant class counting the plan's limits for
    it), and the customer's alerts sent, as (limit, threshold, spent)."""
    plan = PlanFactory(slug="six-a-day")
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    PeriodQuota.objects.create(plan=plan, name="requests-per-day", scope="priced", period="day", units=6)
    customer = SubscriptionFactory(plan=plan)
    sent: list[tuple[str, int, int]] = []

    def receiver(sender, client_tag, budget, threshold, spent_micros, **kwargs):
        if client_tag == f"s.{customer.pk}":
            sent.append((budget, threshold, spent_micros))

    budget_threshold_crossed.connect(receiver, weak=False, dispatch_uid="test-several-throttles-alerts")
    yield issue_key(customer), issue_key(plan=plan), sent
    budget_threshold_crossed.disconnect(dispatch_uid="test-several-throttles-alerts")


def spend_the_tenant(api: APIClient, neighbour: str, tenant: str) -> None:
    """The neighbour's 6 requests for ``tenant``: the tenant's 6 a day spent (so is the neighbour's own)."""
    assert [api.get("/tenant/", HTTP_X_API_KEY=neighbour, HTTP_X_TENANT=tenant).status_code for _ in range(6)] == [
        200
    ] * 6


@pytest.mark.parametrize("store", STORES)
def test_a_withdrawn_request_takes_back_the_quota_alert_level_it_raised(six_a_day, store):
    """4 of the customer's 6 requests spent; a fifth, admitted by its own quota (80 %) and refused by the spent
    tenant's, sends no alert and is withdrawn with its level: the next request, the real fifth, sends the 80 %
    with 5 of 6 spent (it was never sent when the withdrawn admission's level stayed)."""
    customer, neighbour, sent = six_a_day
    api = APIClient()
    assert [api.get("/tenant/", HTTP_X_API_KEY=customer, HTTP_X_TENANT="own").status_code for _ in range(4)] == [
        200
    ] * 4
    spend_the_tenant(api, neighbour, "shared")
    assert api.get("/tenant/", HTTP_X_API_KEY=customer, HTTP_X_TENANT="shared").status_code == 429
    assert sent == []
    assert api.get("/tenant/", HTTP_X_API_KEY=customer, HTTP_X_TENANT="own").status_code == 200
    assert sent == [("requests-per-day", 80, 5)]


@pytest.mark.parametrize("store", STORES)
def test_a_withdrawn_request_gives_its_unit_back_in_a_period_carried_from_another_zone(
    six_a_day, store, set_quotas, quota_clock
):
    """At noon UTC one of the customer's requests is counted in the UTC day; BUDGET_TIME_ZONE moves to Tokyo,
    whose day ends 9 hours earlier (the stored day, named by UTC's later end, is the same one and carries over).
    A request refused by the spent tenant's quota after the customer's own admitted it gives its unit back: 5
    more are admitted, then the sixth is refused (4 were, the refused request counted)."""
    at = datetime.fromtimestamp(quota_clock.now(), UTC) + timedelta(days=2)
    quota_clock.set(datetime(at.year, at.month, at.day, 12, tzinfo=UTC).timestamp())
    set_quotas(BUDGET_TIME_ZONE="UTC")
    customer, neighbour, _ = six_a_day
    api = APIClient()
    assert api.get("/tenant/", HTTP_X_API_KEY=customer, HTTP_X_TENANT="own").status_code == 200
    set_quotas(BUDGET_TIME_ZONE="Asia/Tokyo")
    spend_the_tenant(api, neighbour, "shared")
    assert api.get("/tenant/", HTTP_X_API_KEY=customer, HTTP_X_TENANT="shared").status_code == 429
    codes = [api.get("/tenant/", HTTP_X_API_KEY=customer, HTTP_X_TENANT="own").status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]
