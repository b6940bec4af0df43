"""A customer's own alert thresholds: one ``spend.threshold_reached`` event per budget (and cap), period and
threshold, recorded by the request whose settled spend reached it, or by the watcher for a threshold set after the
spend passed it; looking again records nothing more."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from notifications.models import Event
from notifications.watch import watch
from plans.models import AlertThresholds, CostBudget, SpendCap
from tests.factories import EndpointLimitFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def watched(team):
    """Acme pays 0.01 a request on /t/priced, 0.10 a day; its owners cap the day at 0.04 and want 50 %."""
    plan = team.subscription.plan
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.10"))
    SpendCap.objects.create(subscription=team.subscription, period="day", amount=Decimal("0.04"))
    AlertThresholds.objects.create(subscription=team.subscription, percents=[50])
    return team


def spend(team, times: int) -> None:
    client = APIClient()
    for _ in range(times):
        assert client.get("/t/priced", HTTP_X_API_KEY=team.key).status_code == 200


def reached() -> list[tuple[str, int, str, str]]:
    return sorted(
        (e.data["budget"], e.data["threshold"], e.data["spent"], e.data["amount"])
        for e in Event.objects.filter(type="spend.threshold_reached")
    )


def test_each_threshold_is_reached_once_per_budget_and_period(watched):
    spend(watched, 1)
    assert reached() == []  # 0.01 of the cap's 0.04: 25 %
    spend(watched, 1)
    assert reached() == [("day-cap", 50, "0.020000", "0.040000")]  # 50 % of the cap, by the request
    assert watch().recorded == {}  # looked at: nothing twice
    spend(watched, 2)  # 0.04: the cap's 100 %, and 40 % of the plan's 0.10
    assert watch().recorded == {}
    AlertThresholds.objects.filter(subscription=watched.subscription).update(percents=[40, 50])
    assert watch().recorded == {"spend.threshold_reached": 2}  # 40 % of the budget, 40 % of the cap (set late)
    assert reached() == [
        ("day-budget", 40, "0.040000", "0.100000"),
        ("day-cap", 40, "0.040000", "0.040000"),
        ("day-cap", 50, "0.020000", "0.040000"),
    ]


def test_the_next_period_reaches_them_again(watched, quota_clock):
    spend(watched, 2)
    quota_clock.advance(86_400)
    spend(watched, 2)
    assert watch(timezone.now() + timezone.timedelta(days=1)).recorded == {}
    starts = [e.data["period_start"][:10] for e in Event.objects.filter(type="spend.threshold_reached")]
    assert len(starts) == 2
    assert len(set(starts)) == 2  # one event in each day


def test_a_threshold_is_filed_under_the_ledgers_day(watched, quota_clock):
    """The engine's clock (the ledger's) 5 s before midnight, the host's 5 s after: the 50 % reached is filed
    under the day the ledger counted it in, and the next day's own 50 % is reported too; a watcher's look with
    the host past midnight finds nothing to file under the new day."""
    midnight = ((quota_clock.now() + 5) // 86_400 + 1) * 86_400  # at least 5 s ahead: the clock moves forward
    quota_clock.set(midnight - 5)
    spend(watched, 2)  # 50 % of the cap
    host_after_midnight = datetime.fromtimestamp(midnight + 5, UTC)
    assert watch(host_after_midnight).recorded == {}
    quota_clock.set(midnight + 60)
    spend(watched, 2)
    assert watch(host_after_midnight + timedelta(minutes=1)).recorded == {}
    starts = sorted(e.data["period_start"][:10] for e in Event.objects.filter(type="spend.threshold_reached"))
    day = datetime.fromtimestamp(midnight - 5, UTC).date()
    assert starts == [str(day), str(day + timedelta(days=1))]


def test_a_threshold_is_not_reported_again_when_the_budget_time_zone_moves_west(watched, quota_clock, set_quotas):
    """50 % of the cap reported; BUDGET_TIME_ZONE moves from UTC to New York: the ledger carries the day's spend
    over into the day as New York counts it, and the watcher does not report the 50 % again."""
    quota_clock.set((quota_clock.now() // 86_400 + 1) * 86_400 + 20 * 3600)  # tomorrow 20:00 UTC, 15:00 in New York
    spend(watched, 2)
    assert len(reached()) == 1
    set_quotas(BUDGET_TIME_ZONE="America/New_York")
    spend(watched, 1)
    assert watch().recorded == {}
    assert len(reached()) == 1
