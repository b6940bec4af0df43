"""A key's own limits, set by its subscription's owners: a lower rate and a spending cap, counted in the same
decision as the plan's windows, so the key is refused while its subscription still has room."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from console.models import AuditEntry
from plans.models import APIKey, CostBudget
from tests.factories import EndpointLimitFactory, PlanFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def priced(team):
    """Acme pays 0.01 a request on /t/priced (1000/min), 0.10 a day; a second key for its CI job."""
    plan = team.subscription.plan
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.10"))
    return team


@pytest.fixture
def ci_key(priced):
    key, raw = APIKey.issue(priced.subscription, name="ci")
    return key, raw


def calls(raw: str, times: int) -> list[int]:
    client = APIClient()
    return [client.get("/t/priced", HTTP_X_API_KEY=raw).status_code for _ in range(times)]


def limits_url(team, key) -> str:
    return team.url(f"keys/{key.pk}/limits")


def test_a_keys_own_rate_refuses_it_while_the_subscription_has_room(priced, ci_key, owner_api):
    key, raw = ci_key
    response = owner_api.put(limits_url(priced, key), {"own_rates": "2/min", "cap": None}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == {"own_rates": "2/min", "cap": None}
    assert calls(raw, 3) == [200, 200, 429]
    refused = APIClient().get("/t/priced", HTTP_X_API_KEY=raw)
    assert "key-rate" in refused.json()["violated_policies"]
    assert calls(priced.key, 3) == [200, 200, 200]  # the subscription's other key: the plan's limits only


def test_a_keys_own_cap_refuses_it_with_its_own_reason(priced, ci_key, owner_api):
    key, raw = ci_key
    body = {"own_rates": "", "cap": {"period": "day", "amount": "0.02"}}
    assert owner_api.put(limits_url(priced, key), body, format="json").status_code == 200
    assert calls(raw, 3) == [200, 200, 429]
    refused = APIClient().get("/t/priced", HTTP_X_API_KEY=raw).json()
    assert refused["reason"] == "key_cap_reached"
    assert refused["budget"]["name"] == "key-day-cap"
    assert calls(priced.key, 2) == [200, 200]  # 0.04 of the subscription's 0.10 spent: room left
    cap = owner_api.get(limits_url(priced, key)).json()["cap"]
    assert cap.pop("resets_at").endswith("T00:00:00+00:00")  # the day's end, in the budget zone (UTC)
    assert cap == {
        "period": "day",
        "amount": "0.020000",
        "spent": "0.020000",
        "remaining": "0.000000",
        "state": "reached",
    }


def test_a_keys_cap_is_never_above_its_subscriptions_budget(priced, ci_key, owner_api):
    key, _ = ci_key
    above = owner_api.put(limits_url(priced, key), {"own_rates": "", "cap": {"period": "day", "amount": "1"}},
                          format="json")  # fmt: skip
    assert above.status_code == 400
    assert "0.10 USD" in above.json()["errors"]["cap.amount"]
    no_month = owner_api.put(limits_url(priced, key), {"own_rates": "", "cap": {"period": "month", "amount": "1"}},
                             format="json")  # fmt: skip
    assert no_month.status_code == 400
    assert "no month budget" in no_month.json()["errors"]["cap.period"]
    bad_rate = owner_api.put(limits_url(priced, key), {"own_rates": "ten a minute", "cap": None}, format="json")
    assert bad_rate.status_code == 400
    assert "own_rates" in bad_rate.json()["errors"]
    key.refresh_from_db()
    assert (key.own_rates, key.cap_period, key.cap_amount) == ("", "", None)


def test_a_rolled_key_keeps_its_limits_and_the_change_is_audited(priced, ci_key, owner_api):
    key, _ = ci_key
    owner_api.put(limits_url(priced, key), {"own_rates": "5/min", "cap": None}, format="json")
    rolled = owner_api.post(priced.url(f"keys/{key.pk}/roll"), {"overlap_seconds": 0}, format="json").json()
    assert APIKey.objects.get(pk=rolled["id"]).own_rates == "5/min"
    (entry,) = AuditEntry.objects.filter(action="key.limits")
    assert (entry.actor_name, entry.target) == ("olivia", key.prefix)
    assert entry.detail["now"] == {"own_rates": "5/min", "cap": None}


def test_members_keys_and_strangers_cannot_set_a_keys_limits(priced, ci_key, member_api, key_api, stranger_api):
    key, _ = ci_key
    body = {"own_rates": "1/min", "cap": None}
    assert member_api.put(limits_url(priced, key), body, format="json").status_code == 403
    assert key_api.put(limits_url(priced, key), body, format="json").status_code == 403
    assert stranger_api.put(limits_url(priced, key), body, format="json").status_code == 404
    assert stranger_api.get(limits_url(priced, key)).status_code == 404
    assert member_api.get(limits_url(priced, key)).json() == {"own_rates": "", "cap": None}


def test_a_rolled_key_spends_its_predecessors_own_counters(priced, ci_key, owner_api):
    """A key capped at 0.03 a day and limited to 5/min spends its cap, then is rolled: its successor is refused
    by the same cap (not 0.03 more) and has 2 of the minute's 5 left (not 5 more); the predecessor, working out
    its overlap, shares them too."""
    key, raw = ci_key
    body = {"own_rates": "5/min", "cap": {"period": "day", "amount": "0.03"}}
    assert owner_api.put(limits_url(priced, key), body, format="json").status_code == 200
    assert calls(raw, 3) == [200, 200, 200]  # 0.03 of its cap, 3 of its 5 a minute
    rolled = owner_api.post(priced.url(f"keys/{key.pk}/roll"), {"overlap_seconds": 3600}, format="json")
    assert rolled.status_code == 201
    successor = rolled.json()["key"]
    refused = APIClient().get("/t/priced", HTTP_X_API_KEY=successor)
    assert refused.status_code == 429
    assert refused.json()["reason"] == "key_cap_reached"
    owner_api.put(limits_url(priced, APIKey.objects.get(pk=rolled.json()["id"])), {"own_rates": "5/min", "cap": None},
                  format="json")  # fmt: skip
    assert calls(successor, 2) == [200, 200]  # the 4th and 5th of the minute, across the roll
    assert calls(raw, 1) == [429]  # the predecessor, in its overlap, on the same counters


def test_a_keys_cap_holds_after_a_plan_change_takes_the_budget(priced, ci_key, owner_api):
    """A key capped at 0.02 a day, its subscription moved to a plan with no day budget: the key's cap still
    refuses it (it admitted every request before), in the plan's currency."""
    key, raw = ci_key
    body = {"own_rates": "", "cap": {"period": "day", "amount": "0.02"}}
    assert owner_api.put(limits_url(priced, key), body, format="json").status_code == 200
    unbudgeted = PlanFactory(slug="unbudgeted")
    EndpointLimitFactory(plan=unbudgeted, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    subscription = priced.subscription
    subscription.plan = unbudgeted
    subscription.save()
    assert calls(raw, 3) == [200, 200, 429]
    refused = APIClient().get("/t/priced", HTTP_X_API_KEY=raw).json()
    assert refused["reason"] == "key_cap_reached"
    assert refused["budget"]["currency"] == "USD"
