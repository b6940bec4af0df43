"""Over HTTP: moving ``BUDGET_TIME_ZONE`` west within a month keeps the month's spend and its alerts.

The month under the new zone ends later than the stored one; the spend stored under the old zone is the same
month's (see tests/quotas/behaviour/test_period_time_zone.py for every store and the east move).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from plans.models import CostBudget
from quotas.signals import budget_threshold_crossed
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def alerts():
    """The thresholds of the budget alerts sent."""
    sent: list[int] = []

    def receiver(sender, threshold, **kwargs):
        sent.append(threshold)

    budget_threshold_crossed.connect(receiver, weak=False, dispatch_uid="test-time-zone-alerts")
    yield sent
    budget_threshold_crossed.disconnect(dispatch_uid="test-time-zone-alerts")


def test_moving_the_budget_time_zone_west_keeps_the_months_spend(set_quotas, alerts):
    """0.90 of a 1.00 month spent in UTC; the zone moves to New York: 0.10 more is admitted, then requests are
    refused (not another 1.00 spent), and each alert is sent once."""
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="month", amount=Decimal("1.00"))
    client, key = APIClient(), issue_key(plan=plan)
    assert client.get("/t/priced?est=0.90", HTTP_X_API_KEY=key).status_code == 200
    assert alerts == [80]
    set_quotas(BUDGET_TIME_ZONE="America/New_York")
    assert client.get("/t/priced?est=0.10", HTTP_X_API_KEY=key).status_code == 200
    codes = [client.get("/t/priced?est=0.10", HTTP_X_API_KEY=key).status_code for _ in range(3)]
    assert codes == [429] * 3
    assert alerts == [80, 100]
    budget = client.get("/api/v1/usage/current", HTTP_X_API_KEY=key).json()["budgets"][0]
    assert Decimal(budget["spent"]) == Decimal("1.00")


@pytest.mark.parametrize("store", [pytest.param("memory"), pytest.param("redis", marks=pytest.mark.redis)])
def test_a_cost_settled_after_the_zone_moved_east_is_charged_to_the_months_budget(set_quotas, quota_clock, store):
    """0.01 spent in UTC; the zone moves to Tokyo, whose month ends 9 hours earlier (the stored month, named by
    the later end, is the same one and carries over); a request estimated at 0.01 costs 0.30: the month holds
    0.31 (it held 0.02 when the settlement took the carried month for a later one and dropped the 0.29)."""
    at = datetime.fromtimestamp(quota_clock.now(), UTC)
    quota_clock.set(datetime(at.year + at.month // 12, at.month % 12 + 1, 15, 12, tzinfo=UTC).timestamp())  # mid-month
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="month", amount=Decimal("1.00"))
    client, key = APIClient(), issue_key(plan=plan)
    assert client.get("/t/priced", HTTP_X_API_KEY=key).status_code == 200
    set_quotas(BUDGET_TIME_ZONE="Asia/Tokyo")
    assert client.get("/t/priced?actual=0.30", HTTP_X_API_KEY=key).status_code == 200
    budget = client.get("/api/v1/usage/current", HTTP_X_API_KEY=key).json()["budgets"][0]
    assert Decimal(budget["spent"]) == Decimal("0.31")
