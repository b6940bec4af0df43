"""A plan has one currency: its budgets and its subscriptions' own budgets share it, checked in the model, in
the admin (several budgets in one go) and at start-up; upgrade offers never compare amounts across currencies."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core import checks
from django.core.exceptions import ValidationError
from django.test import Client

from plans.models import CostBudget
from quotas.engine import default_engine
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
    rules = default_engine.runtime().rules.reload()
    budget = next(w for r in rules.limits_for(free.pk) for w in r.windows if w.is_budget)
    assert rules.upgrade_for(free.pk, budget).slug == "dollars"


def test_sibling_subscriptions_of_one_plan_share_its_currency():
    """A plan without budgets of its own: one subscription's own budget in EUR puts the plan in EUR, so a sibling's
    own budget in USD is refused (the start-up check would have found the plan in two currencies)."""
    plan = PlanFactory(slug="open")
    CostBudget.objects.create(subscription=SubscriptionFactory(plan=plan), period="day", amount=1, currency="EUR")
    sibling = SubscriptionFactory(plan=plan)
    with pytest.raises(ValidationError, match="are in EUR"):
        CostBudget(subscription=sibling, period="day", amount=Decimal("5"), currency="USD").full_clean()
    CostBudget(subscription=sibling, period="day", amount=Decimal("5"), currency="EUR").full_clean()


def test_a_subscription_with_its_own_budget_cannot_move_to_a_plan_in_another_currency():
    """Its own budget in EUR, the plan it would move to in USD: refused, naming both currencies."""
    euros, dollars = PlanFactory(slug="euros"), PlanFactory(slug="dollars")
    CostBudget.objects.create(plan=dollars, period="month", amount=Decimal("10"), currency="USD")
    sub = SubscriptionFactory(plan=euros)
    CostBudget.objects.create(subscription=sub, period="day", amount=Decimal("1"), currency="EUR")
    sub.plan = dollars
    with pytest.raises(ValidationError, match="budgets are in USD and the subscription's own budgets in EUR"):
        sub.full_clean()
    sub.plan = PlanFactory(slug="no-budgets")
    sub.full_clean()


def admin_with_change_permissions() -> Client:
    """A staff user who may view and change subscriptions and their budgets (not a superuser)."""
    from django.contrib.auth.models import Permission

    user = UserFactory(is_staff=True)
    codenames = ("view_subscription", "change_subscription", "view_costbudget", "add_costbudget", "change_costbudget")
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    browser = Client()
    browser.force_login(user)
    return browser


def subscription_form(sub, plan, budgets=()) -> dict:
    """The admin's change form of ``sub`` as posted: its fields, on ``plan``, with new own ``budgets``."""
    data = {
        "name": sub.name, "plan": plan.pk, "user": "", "started_on": sub.started_on.isoformat(), "is_active": "on",
        "overrides-TOTAL_FORMS": "0", "overrides-INITIAL_FORMS": "0",
        "budgets-TOTAL_FORMS": str(len(budgets)), "budgets-INITIAL_FORMS": "0",
        "api_keys-TOTAL_FORMS": "0", "api_keys-INITIAL_FORMS": "0",
    }  # fmt: skip
    for i, (period, amount, currency) in enumerate(budgets):
        data |= {f"budgets-{i}-period": period, f"budgets-{i}-amount": amount, f"budgets-{i}-currency": currency}
    return data


def test_the_admin_refuses_a_siblings_budget_in_another_currency():
    """Through the subscription's change page, as staff with change permissions: the form error, nothing saved."""
    plan = PlanFactory(slug="open")
    CostBudget.objects.create(subscription=SubscriptionFactory(plan=plan), period="day", amount=1, currency="EUR")
    sibling = SubscriptionFactory(plan=plan)
    page = admin_with_change_permissions().post(
        f"/admin/quota_plans/subscription/{sibling.pk}/change/", subscription_form(sibling, plan, [("day", "5", "USD")])
    )
    assert page.status_code == 200
    assert "are in EUR: a plan has one currency." in page.content.decode()
    assert not CostBudget.objects.filter(subscription=sibling).exists()


def test_the_admin_refuses_moving_a_subscription_to_a_plan_in_another_currency():
    """The change page and the move action alike: refused with a message naming both currencies, nothing moved."""
    euros, dollars = PlanFactory(slug="euros"), PlanFactory(slug="dollars")
    CostBudget.objects.create(plan=dollars, period="month", amount=Decimal("10"), currency="USD")
    sub = SubscriptionFactory(plan=euros)
    CostBudget.objects.create(subscription=sub, period="day", amount=Decimal("1"), currency="EUR")
    browser = admin_with_change_permissions()
    page = browser.post(f"/admin/quota_plans/subscription/{sub.pk}/change/", subscription_form(sub, dollars))
    assert page.status_code == 200
    refusal = "Plan dollars&#x27;s budgets are in USD and the subscription&#x27;s own budgets in EUR"
    assert refusal in page.content.decode()
    move = {"action": "move_to_plan", "_selected_action": [sub.pk], "apply": "1", "plan": dollars.pk}
    page = browser.post("/admin/quota_plans/subscription/", move)
    assert page.status_code == 200  # the plan is asked again
    assert refusal in page.content.decode()
    sub.refresh_from_db()
    assert sub.plan == euros
