"""Model validation, admin and management commands of the plans app."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from plans.models import APIKey, CostBudget, EndpointLimit, Plan, Subscription
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"rates": "0/min"}, "rates", "at least 1"),
        ({"rates": "10/fortnight"}, "rates", "Unknown time unit"),
        ({"rates": "many"}, "rates", "is not a rate"),
        ({"weight": -1}, "weight", "greater than or equal to 0"),
        ({"rates": "5/min", "weight": 6}, "weight", "no request could ever pass"),
        ({"algorithm": "magic"}, "algorithm", "not a valid choice"),
        ({"max_delay": 1.0}, "max_delay", "Only a leaky bucket"),
        ({"max_delay": 99.0, "algorithm": "leaky_bucket"}, "max_delay", "MAX_DELAY_CAP"),
        ({"methods": "GET, FETCH"}, "methods", "Unknown HTTP method"),
        ({"scope": "s", "path_prefix": "/api/"}, "path_prefix", "not both"),
        ({"path_prefix": "api/"}, "path_prefix", "starts with '/'"),
        ({"name": "has space"}, "name", "Use letters"),
    ],
)
def test_invalid_limits_are_refused_with_a_clear_message(fields, field, message):
    limit = EndpointLimit(plan=PlanFactory(), name=fields.pop("name", "ok"), rates=fields.pop("rates", "10/min"),
                          **fields)  # fmt: skip
    with pytest.raises(ValidationError) as info:
        limit.full_clean()
    assert field in info.value.message_dict
    assert message in " ".join(info.value.message_dict[field])


def test_valid_limit_normalises_methods():
    limit = EndpointLimit(plan=PlanFactory(), name="ok", rates="10/s; 100/min", methods="get,post")
    limit.full_clean()
    assert limit.methods == "GET, POST"


@pytest.mark.postgres
def test_postgres_uses_djangos_native_connection_pool():
    """With DATABASE_URL=postgres://..., connections come from psycopg's pool."""
    from django.db import connection

    assert connection.vendor == "postgresql"
    assert connection.settings_dict["OPTIONS"]["pool"]
    assert connection.pool is not None


def test_only_one_default_plan():
    PlanFactory(slug="a", is_default=True)
    second = Plan(slug="b", name="B", is_default=True)
    with pytest.raises(ValidationError, match="already the default"):
        second.full_clean()


def test_admin_shows_validation_message_for_a_bad_rate():
    admin_user = UserFactory(username="admin", is_staff=True, is_superuser=True)
    client = APIClient()
    client.force_login(admin_user)
    data = {
        "slug": "x", "name": "X", "monthly_price": "0", "priority": "0", "description": "",
        "limits-TOTAL_FORMS": "1", "limits-INITIAL_FORMS": "0", "limits-MIN_NUM_FORMS": "0",
        "limits-MAX_NUM_FORMS": "1000", "limits-0-name": "global", "limits-0-rates": "0/min",
        "limits-0-algorithm": "token_bucket", "limits-0-weight": "1", "limits-0-max_delay": "0",
    }  # fmt: skip
    response = client.post("/admin/quota_plans/plan/add/", data)
    assert response.status_code == 200  # the form is shown again, not saved
    assert "must be at least 1" in response.content.decode()
    assert not Plan.objects.filter(slug="x").exists()


def test_admin_plan_page_renders():
    admin_user = UserFactory(username="admin", is_staff=True, is_superuser=True)
    plan = PlanFactory(slug="free")
    EndpointLimitFactory(plan=plan)
    client = APIClient()
    client.force_login(admin_user)
    assert client.get(f"/admin/quota_plans/plan/{plan.pk}/change/").status_code == 200
    assert client.get("/admin/quota_plans/apikey/").status_code == 200


def test_issue_key_prints_the_raw_key_once_on_its_last_line():
    PlanFactory(slug="pro")
    out = io.StringIO()
    call_command("issue_key", "--plan", "pro", "--name", "ACME", stdout=out)
    raw = out.getvalue().strip().splitlines()[-1]
    key = APIKey.objects.get()
    assert raw.startswith(key.prefix)
    assert raw.startswith("qk_")
    assert key.key_hash != raw
    assert raw not in key.key_hash
    assert key.subscription.plan.slug == "pro"
    assert key.subscription.name == "ACME"
    assert APIClient().get("/api/demo/ping", HTTP_X_API_KEY=raw).status_code == 200


def test_issue_key_for_an_existing_subscription():
    PlanFactory(slug="pro")
    call_command("issue_key", "--plan", "pro", stdout=io.StringIO())
    sub = Subscription.objects.get()
    call_command("issue_key", "--subscription", str(sub.pk), stdout=io.StringIO())
    assert sub.api_keys.count() == 2


def test_issue_key_unknown_plan_is_a_clear_error():
    PlanFactory(slug="pro")
    with pytest.raises(CommandError, match=r"No plan 'gold'\. Known plans: pro"):
        call_command("issue_key", "--plan", "gold")


def test_seed_demo_is_idempotent():
    first, second = io.StringIO(), io.StringIO()
    call_command("seed_demo", stdout=first)
    call_command("seed_demo", stdout=second)
    assert first.getvalue() == second.getvalue()
    assert set(Plan.objects.values_list("slug", flat=True)) == {"free", "pro", "enterprise"}
    assert APIKey.objects.count() == 3
    assert EndpointLimit.objects.count() == 9
    assert Plan.objects.get(is_default=True).slug == "free"


def _empty_formsets(*prefixes: str) -> dict[str, str]:
    data = {}
    for prefix in prefixes:
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    return data


def test_admin_adds_a_plan_with_its_budget_in_one_go():
    """The add page takes the plan and its budget together (the budget is validated before the plan has an id)."""
    client = APIClient()
    client.force_login(UserFactory(username="admin", is_staff=True, is_superuser=True))
    data = {
        "slug": "metered", "name": "Metered", "monthly_price": "0", "priority": "0", "description": "",
        "ban_threshold": "0", "ban_window": "60", "ban_durations": "60", "local_allowances": "on",
        **_empty_formsets("limits", "period_quotas"),
        "budgets-TOTAL_FORMS": "1", "budgets-INITIAL_FORMS": "0",
        "budgets-0-period": "day", "budgets-0-amount": "0.30", "budgets-0-currency": "USD",
    }  # fmt: skip
    response = client.post("/admin/quota_plans/plan/add/", data)
    assert response.status_code == 302, response.content.decode()
    budget = CostBudget.objects.get()
    assert budget.plan == Plan.objects.get(slug="metered")
    assert budget.subscription is None
    assert str(budget.amount) == "0.300000"


def test_admin_adds_a_subscription_with_its_own_budget_in_one_go():
    client = APIClient()
    client.force_login(UserFactory(username="admin", is_staff=True, is_superuser=True))
    plan = PlanFactory(slug="pro")
    data = {
        "name": "ACME", "plan": plan.pk, "started_on": "2026-01-01", "is_active": "on",
        **_empty_formsets("overrides", "api_keys"),
        "budgets-TOTAL_FORMS": "1", "budgets-INITIAL_FORMS": "0",
        "budgets-0-period": "month", "budgets-0-amount": "25", "budgets-0-currency": "EUR",
    }  # fmt: skip
    response = client.post("/admin/quota_plans/subscription/add/", data)
    assert response.status_code == 302, response.content.decode()
    budget = CostBudget.objects.get()
    assert budget.subscription.name == "ACME"
    assert budget.plan is None


def test_a_budget_still_needs_exactly_one_owner():
    with pytest.raises(ValidationError, match="exactly one"):
        CostBudget(period="day", amount=1).full_clean()
    both = CostBudget(period="day", amount=1, plan=PlanFactory(slug="p1"), subscription=SubscriptionFactory())
    with pytest.raises(ValidationError, match="exactly one"):
        both.full_clean()


def test_the_plan_page_shows_budgets_as_money_not_floats():
    """Grouped thousands and the currency's own decimals: 1,234.50 USD, 500 JPY (never 1234.50 or 500.00)."""
    admin_user = UserFactory(username="admin", is_staff=True, is_superuser=True)
    usd, jpy = PlanFactory(slug="usd"), PlanFactory(slug="jpy")
    EndpointLimitFactory(plan=usd)
    EndpointLimitFactory(plan=jpy)
    CostBudget.objects.create(plan=usd, period="day", amount=Decimal("1234.5"), currency="USD")
    CostBudget.objects.create(plan=jpy, period="month", amount=Decimal("500"), currency="JPY")
    client = APIClient()
    client.force_login(admin_user)
    assert "1,234.50 USD per day" in client.get(f"/admin/quota_plans/plan/{usd.pk}/change/").content.decode()
    assert "500 JPY per month" in client.get(f"/admin/quota_plans/plan/{jpy.pk}/change/").content.decode()


def test_a_subscription_starts_on_the_day_of_the_budget_time_zone(settings, set_quotas):
    """Its billing anchor is the day where periods begin (BUDGET_TIME_ZONE), not in TIME_ZONE: 25 hours apart
    here, so the two dates always differ."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    settings.TIME_ZONE = "Pacific/Pago_Pago"  # UTC-11
    set_quotas(BUDGET_TIME_ZONE="Pacific/Kiritimati")  # UTC+14
    sub = Subscription.objects.create(name="late sign-up", plan=PlanFactory(slug="p"))
    assert sub.started_on == datetime.now(ZoneInfo("Pacific/Kiritimati")).date()
    assert sub.started_on != datetime.now(ZoneInfo("Pacific/Pago_Pago")).date()
