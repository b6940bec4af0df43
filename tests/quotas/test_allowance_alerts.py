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


@pytest.mark.parametrize("store", STORES)
def test_the_grant_that_crosses_a_threshold_reports_the_spend_committed_then(
    store, request, set_quotas, quota_clock, alerts
):
    """0.07 spent of a 0.10 day (one request of 0.04, one of 0.03), then a request of 0.01 that takes a
    3-request allowance (the 0.03 left): it commits 0.08, and its 80 % alert says 0.08. It said 0.06: decide.lua
    reports a budget's committed spend (the reservation apart), and the allowance took the later requests' units
    off it once more. Found by the money machine (tests/quotas/test_money_machine.py, seed 31)."""
    if store == "redis":
        request.getfixturevalue("fresh_redis")
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=1, HORIZON=10.0, SHARE=1.0, MAX_REQUESTS=4)
    plan = PlanFactory(slug="metered", is_default=True, local_allowances=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="10000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.10"))
    key = issue_key(plan=plan)
    client = APIClient()
    for estimate in ("0.04", "0.03"):
        assert client.get(f"/t/priced?est={estimate}", HTTP_X_API_KEY=key).status_code == 200
    assert alerts == []
    assert client.get("/t/priced", HTTP_X_API_KEY=key).status_code == 200
    assert [allowance.size for allowance in default_engine.runtime().guard.usage.allowances.live()] == [3]
    assert alerts == [(80, to_micros(Decimal("0.08")))]
