"""A plan has one currency: its budgets and its subscriptions' own budgets share it, checked in the model, in
the admin (several budgets in one go) and at start-up; upgrade offers never compare amounts across currencies."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core import checks
from django.core.exceptions import ValidationError
from django.test import Client

from plans.models import CostBudget
from quotas.runtime import get_runtime
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_a_second_currency_on_a_plan_is_refused():
    plan = PlanFactory(slug="eu")
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1"), currency="EUR")
    with pytest.raises(ValidationError, match="in EUR"):
        CostBudget(plan=plan, period="month", amount=Decimal("10"), currency="JPY").full_clean()
    CostBudget(plan=plan, period="month", amount=Decimal("10"), currency="EUR").full_clean()


def test_a_subscriptions_own_budget_is_in_its_plans_currency():
    plan = PlanFactory(slug="eu")
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1"), currency="EUR")
    sub = SubscriptionFactory(plan=plan)
    with pytest.raises(ValidationError, match="in EUR"):
        CostBudget(subscription=sub, period="day", amount=Decimal("5"), currency="USD").full_clean()


def test_the_admin_refuses_budgets_in_two_currencies_added_together():
    browser = Client()
    browser.force_login(UserFactory(is_staff=True, is_superuser=True))
    data = {
        "slug": "mixed", "name": "Mixed", "monthly_price": "0", "priority": "0", "description": "",
        "ban_threshold": "0", "ban_window": "60", "ban_durations": "60", "local_allowances": "on",
        "limits-TOTAL_FORMS": "0", "limits-INITIAL_FORMS": "0",
        "period_quotas-TOTAL_FORMS": "0", "period_quotas-INITIAL_FORMS": "0",
        "budgets-TOTAL_FORMS": "2", "budgets-INITIAL_FORMS": "0",
        "budgets-0-period": "day", "budgets-0-amount": "1", "budgets-0-currency": "USD",
        "budgets-1-period": "month", "budgets-1-amount": "100", "budgets-1-currency": "JPY",
    }  # fmt: skip
    page = browser.post("/admin/quota_plans/plan/add/", data)
    assert page.status_code == 200
    assert "A plan has one currency: these budgets are in JPY, USD." in page.content.decode()
    assert not CostBudget.objects.exists()


def test_mixed_currencies_already_stored_are_a_start_up_error():
    plan = PlanFactory(slug="eu")
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1"), currency="EUR")
    CostBudget.objects.bulk_create(  # bypassing validation, as a data migration or a script could
        [CostBudget(subscription=SubscriptionFactory(plan=plan), period="day", amount=Decimal("1"), currency="USD")]
    )
    found = [m for m in checks.run_checks(databases=["default"]) if m.id == "quota_plans.E002"]
    assert len(found) == 1
    assert "EUR, USD" in found[0].msg


def test_no_upgrade_offer_compares_amounts_in_another_currency():
    """A higher plan's budget in JPY (10,000) is not 'larger' than a USD budget of 1: no offer from it."""
    free = PlanFactory(slug="free", monthly_price=0)
    yen = PlanFactory(slug="yen", monthly_price=10, priority=1)
    dollars = PlanFactory(slug="dollars", monthly_price=20, priority=2)
    for plan in (free, yen, dollars):
        EndpointLimitFactory(plan=plan, name="global", rates="1000/min")
    CostBudget.objects.create(plan=free, period="day", amount=Decimal("1"), currency="USD")
    CostBudget.objects.create(plan=yen, period="day", amount=Decimal("10000"), currency="JPY")
    CostBudget.objects.create(plan=dollars, period="day", amount=Decimal("5"), currency="USD")
    rules = get_runtime().rules.reload()
    budget = next(w for r in rules.limits_for(free.pk) for w in r.windows if w.is_budget)
    assert rules.upgrade_for(free.pk, budget).slug == "dollars"
