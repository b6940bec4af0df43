"""Budget threshold crossings become BudgetAlert rows, once each."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from plans.models import APIKey, CostBudget
from quotas.identity.clients import hash_api_key
from quotas.signals import budget_threshold_crossed
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from usage.models import BudgetAlert

from .conftest import send

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def metered(db):
    """A plan whose clients may spend 1.00 a day."""
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="1000/min", algorithm="token_bucket")
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1.00"))
    return plan


def test_crossing_80_and_100_percent_records_one_alert_each(api, metered):
    """Spending 0.5, then 0.4 (90 %), then a refused 0.2: one 80 % and one 100 % alert, never repeated."""
    key = issue_key(plan=metered)
    subscription = APIKey.objects.get(key_hash=hash_api_key(key)).subscription

    assert send(api, key, 1, "/t/priced?est=0.5") == {200: 1}
    assert not BudgetAlert.objects.exists()
    assert send(api, key, 1, "/t/priced?est=0.4") == {200: 1}
    assert send(api, key, 2, "/t/priced?est=0.2") == {429: 2}

    alerts = list(BudgetAlert.objects.order_by("threshold"))
    assert [(a.threshold, a.budget, a.client, a.subscription) for a in alerts] == [
        (80, "day-budget", f"s.{subscription.pk}", subscription),
        (100, "day-budget", f"s.{subscription.pk}", subscription),
    ]
    assert alerts[0].spent == Decimal("0.9")
    assert alerts[0].amount == Decimal("1")
    assert alerts[0].period_start == alerts[1].period_start
    assert alerts[0].period_start.hour == 0
    assert alerts[0].period_start.minute == 0


def test_a_repeated_signal_is_recorded_once(db):
    """The receiver is idempotent; a subscription that no longer exists is kept as its tag only."""
    crossing = {
        "client_tag": "{s.404}", "subscription_id": 404, "budget": "day-budget", "threshold": 80,
        "period_start": datetime(2026, 1, 1, tzinfo=UTC), "spent_micros": 800_000, "amount_micros": 1_000_000,
    }  # fmt: skip
    budget_threshold_crossed.send(sender=None, **crossing)
    budget_threshold_crossed.send(sender=None, **crossing)

    (alert,) = BudgetAlert.objects.all()
    assert (alert.client, alert.subscription, alert.threshold, alert.spent) == ("s.404", None, 80, Decimal("0.8"))
