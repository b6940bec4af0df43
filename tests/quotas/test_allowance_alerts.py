"""An allowance's grant raises no budget alert: its later requests' estimates are reserved, not spent, and the
alert levels follow spend as it is committed (when the allowance ends, or a request settles)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from plans.models import CostBudget
from quotas.engine import default_engine
from quotas.formats.money import to_micros
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

STORES = [pytest.param("memory", id="memory"), pytest.param("redis", id="redis", marks=pytest.mark.redis)]


@pytest.fixture(params=STORES)
def large_allowances(request, set_quotas):
    """A client is busy from its second request, and may take up to 50 requests' units at once."""
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=1, HORIZON=10.0, SHARE=1.0, MAX_REQUESTS=50)
    if request.param == "redis":
        request.getfixturevalue("fresh_redis")


def spend(key: str, times: int) -> list[int]:
    client = APIClient()
    return [client.get("/t/priced", HTTP_X_API_KEY=key).status_code for _ in range(times)]


def test_an_allowance_grant_raises_no_alert_before_its_spend_reaches_the_threshold(
    large_allowances, quota_clock, alerts
):
    """0.01 a request on a 1.00 day: 36 requests (0.36, a 50-request allowance among them) send no 80 % alert;
    the allowance's unused units go back at its end; the alert comes when the day really passes 0.80, saying what
    was spent then, once."""
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="10000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1.00"))
    key = issue_key(plan=plan)
    runtime = default_engine.runtime()
    assert spend(key, 36) == [200] * 36
    runtime.settle_allowances(everything=True)  # the allowance ends: 0.36 spent, its unused units given back
    assert alerts == []
    assert spend(key, 50) == [200] * 50
    runtime.settle_allowances(everything=True)  # 0.86 spent
    assert [threshold for threshold, _ in alerts] == [80]
    assert to_micros(Decimal("0.80")) <= alerts[0][1] <= to_micros(Decimal("0.86"))
