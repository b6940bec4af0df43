"""A view listing several QuotaThrottle classes (DRF's Burst plus Sustained pattern) makes one decision.

The plan's limits and budgets are charged once, the one verdict is settled (estimate replaced by the actual
cost), and where no plan covers the client each class's own rate applies, all in that one decision.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import include, path
from rest_framework.test import APIClient

from plans.models import CostBudget
from quotas.formats.money import to_micros
from quotas.throttling import QuotaThrottle
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
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


urlpatterns = [path("burst/", PricedBurstView.as_view()), path("", include("config.urls"))]


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
