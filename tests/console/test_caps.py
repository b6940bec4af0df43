"""A customer's own spending caps and alert thresholds: set by owners over HTTP, enforced in the decision that
enforces the plan's budget (a cap refuses while the budget still has room), audited, and never above the plan."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from console.models import AuditEntry
from plans.models import CostBudget, SpendCap
from quotas.signals import budget_threshold_crossed
from tests.factories import EndpointLimitFactory, PlanFactory
from tests.quotas.test_clock import next_edge

from .conftest import signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def priced(team):
    """Acme's plan prices /t/priced at 0.01 a request, with a daily budget of 0.05 and a monthly one of 1.00."""
    plan = team.subscription.plan
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.05"))
    CostBudget.objects.create(plan=plan, period="month", amount=Decimal("1.00"))
    return team


def spend(team, times: int) -> list[int]:
    client = APIClient()
    return [client.get("/t/priced", HTTP_X_API_KEY=team.key).status_code for _ in range(times)]


def test_an_owner_reads_the_budgets_and_sets_a_cap(priced, owner_api, member_api, quota_clock):
    """Each period says what it spent, what is left of the amount enforced (the cap once set), its state and
    when it resets (the day: next midnight in the budget zone, UTC), read from the ledger without counting."""
    assert spend(priced, 2) == [200, 200]
    midnight = datetime.fromtimestamp(next_edge(86_400, quota_clock.now()), UTC).isoformat()
    body = owner_api.get(priced.url("caps")).json()
    month_resets = body["periods"][1].pop("resets_at")
    assert datetime.fromisoformat(month_resets).timestamp() > quota_clock.now()
    assert body == {
        "periods": [
            {"period": "day", "budget": "0.050000", "currency": "USD", "cap": None, "cap_alone": False,
             "spent": "0.020000", "remaining": "0.030000", "resets_at": midnight, "state": "ok"},
            {"period": "month", "budget": "1.000000", "currency": "USD", "cap": None, "cap_alone": False,
             "spent": "0.020000", "remaining": "0.980000", "state": "ok"},
        ],
        "thresholds": [],
    }  # fmt: skip
    assert owner_api.get(priced.url("caps")).json()["periods"][0]["spent"] == "0.020000"  # reading counted nothing
    response = owner_api.put(priced.url("caps/day"), {"amount": "0.025"}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["periods"][0] == {
        "period": "day", "budget": "0.050000", "currency": "USD", "cap": "0.025000", "cap_alone": False,
        "spent": "0.020000", "remaining": "0.005000", "resets_at": midnight, "state": "near",
    }  # fmt: skip
    assert spend(priced, 1) == [429]  # 0.01 more would pass the cap: refused, nothing spent
    owner_api.put(priced.url("caps/day"), {"amount": "0.02"}, format="json")
    day = member_api.get(priced.url("caps")).json()["periods"][0]
    assert (day["cap"], day["spent"], day["remaining"], day["state"]) == ("0.020000", "0.020000", "0.000000", "reached")


def test_a_cap_refuses_with_its_own_reason_while_the_budget_has_room(priced, owner_api):
    assert spend(priced, 1) == [200]  # spent before the cap is set counts against it: one counter
    owner_api.put(priced.url("caps/day"), {"amount": "0.03"}, format="json")
    assert spend(priced, 3) == [200, 200, 429]
    refused = APIClient().get("/t/priced", HTTP_X_API_KEY=priced.key)
    body = refused.json()
    assert body["reason"] == "spend_cap_reached", body
    assert body["budget"]["name"] == "day-cap"
    assert body["budget"]["amount"] == "0.030000"
    assert "Retry-After" in refused
    owner_api.delete(priced.url("caps/day"))
    assert spend(priced, 3) == [200, 200, 429]  # the plan's 0.05: 3 spent, 2 more
    assert APIClient().get("/t/priced", HTTP_X_API_KEY=priced.key).json()["reason"] == "budget_exceeded"


def test_a_cap_may_not_raise_the_budget_nor_cap_a_period_without_one(priced, owner_api, team):
    above = owner_api.put(priced.url("caps/day"), {"amount": "0.06"}, format="json")
    assert above.status_code == 400
    assert above["Content-Type"] == "application/problem+json"
    assert "0.05 USD" in above.json()["errors"]["amount"]
    CostBudget.objects.filter(period="month").delete()
    none = owner_api.put(priced.url("caps/month"), {"amount": "0.5"}, format="json")
    assert none.status_code == 400
    assert "no month budget" in none.json()["errors"]["period"]
    bad = owner_api.put(priced.url("caps/day"), {"amount": "-1"}, format="json")
    assert bad.status_code == 400
    assert "amount" in bad.json()["errors"]
    assert owner_api.put(priced.url("caps/week"), {"amount": "1"}, format="json").status_code == 404
    assert not SpendCap.objects.exists()


def test_thresholds_are_set_by_owners_and_checked(priced, owner_api):
    response = owner_api.put(priced.url("thresholds"), {"percents": [90, 50, 75, 50]}, format="json")
    assert response.json() == {"percents": [50, 75, 90]}
    assert owner_api.get(priced.url("caps")).json()["thresholds"] == [50, 75, 90]
    for bad in ([0], [101], ["half"], list(range(1, 13))):
        refused = owner_api.put(priced.url("thresholds"), {"percents": bad}, format="json")
        assert refused.status_code == 400, bad
        assert all(name.startswith("percents") for name in refused.json()["errors"]), refused.json()


def test_changes_are_audited_with_their_actor(priced, owner_api):
    owner_api.put(priced.url("caps/day"), {"amount": "0.03"}, format="json")
    owner_api.put(priced.url("caps/day"), {"amount": "0.02"}, format="json")
    owner_api.delete(priced.url("caps/day"))
    owner_api.put(priced.url("thresholds"), {"percents": [50]}, format="json")
    entries = list(AuditEntry.objects.order_by("id").values_list("actor_name", "action", "target", "detail"))
    assert entries == [
        ("olivia", "cap.set", "day", {"amount": "0.030000", "was": None}),
        ("olivia", "cap.set", "day", {"amount": "0.020000", "was": "0.030000"}),
        ("olivia", "cap.remove", "day", {}),
        ("olivia", "thresholds.set", "", {"percents": [50]}),
    ]


ROUTES = [
    ("put", "caps/day", {"amount": "0.01"}),
    ("delete", "caps/day", None),
    ("put", "thresholds", {"percents": [50]}),
]


@pytest.mark.parametrize(("method", "tail", "body"), ROUTES)
def test_members_and_keys_cannot_change_and_strangers_find_nothing(
    priced, member_api, key_api, stranger_api, method, tail, body
):
    for client in (member_api, key_api):
        assert getattr(client, method)(priced.url(tail), body, format="json").status_code == 403
    assert getattr(stranger_api, method)(priced.url(tail), body, format="json").status_code == 404
    assert stranger_api.get(priced.url("caps")).status_code == 404
    assert not AuditEntry.objects.exists()


def test_a_session_change_needs_the_csrf_token(priced):
    browser = signed_in(priced.owner, csrf=True)
    refused = browser.put(priced.url("caps/day"), {"amount": "0.01"}, format="json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]


def test_a_cap_holds_on_its_own_after_a_plan_change_takes_its_budget(priced, owner_api, team):
    """A subscription capped at 0.03 a day moves to a plan with no day budget: the cap is still enforced, as a
    budget of its own amount (every request was admitted before), and the console says so."""
    owner_api.put(priced.url("caps/day"), {"amount": "0.03"}, format="json")
    unbudgeted = PlanFactory(slug="unbudgeted")
    EndpointLimitFactory(plan=unbudgeted, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    subscription = team.subscription
    subscription.plan = unbudgeted
    subscription.save()
    assert spend(priced, 4) == [200, 200, 200, 429]
    refused = APIClient().get("/t/priced", HTTP_X_API_KEY=priced.key).json()
    assert refused["reason"] == "spend_cap_reached"
    assert refused["budget"]["name"] == "day-cap"
    day = owner_api.get(priced.url("caps")).json()["periods"][0]
    assert day.pop("resets_at").endswith("T00:00:00+00:00")  # the day's end, in the budget zone (UTC)
    assert day == {"period": "day", "budget": None, "currency": "USD", "cap": "0.030000", "cap_alone": True,
                   "spent": "0.030000", "remaining": "0.000000", "state": "reached"}  # fmt: skip
    page = owner_api.get(f"/usage/account/{subscription.pk}/").content.decode()
    assert "your cap is enforced as a budget of its own" in page


def test_a_removed_cap_leaves_the_budgets_own_alerts_due(priced, owner_api):
    """A 0.03 day cap on the 0.05 budget sends its 80 % and 100 % alerts; the owner removes it, and the day goes
    on to the budget's 0.05: the budget's own 80 % and 100 % alerts are sent too (they were lost, as the cap's
    level was the budget's)."""
    sent: list[tuple[str, int]] = []

    def receiver(sender, budget, threshold, **kwargs):
        sent.append((budget, threshold))

    budget_threshold_crossed.connect(receiver, weak=False)
    try:
        owner_api.put(priced.url("caps/day"), {"amount": "0.03"}, format="json")
        assert spend(priced, 3) == [200, 200, 200]
        owner_api.delete(priced.url("caps/day"))
        assert spend(priced, 3) == [200, 200, 429]
    finally:
        budget_threshold_crossed.disconnect(receiver)
    budget = CostBudget.objects.get(plan=priced.subscription.plan, period="day").name
    assert sent == [("day-cap", 80), ("day-cap", 100), (budget, 80), (budget, 100)]
