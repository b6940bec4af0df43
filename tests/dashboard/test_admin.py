"""Admin features: effective limits with the adaptive multiplier, inline validation errors, moving
subscriptions between plans through an intermediate page, and issuing an API key shown once."""

from __future__ import annotations

import time

import pytest

from adaptive.publish import publish_multipliers
from plans.models import APIKey, EndpointLimit, LimitOverride, Subscription
from quotas.identity.clients import hash_api_key
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory
from tests.store_client import board_of

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/quota_plans/subscription/"


def inline_management(prefix: str, total: int = 0) -> dict[str, str]:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


def test_effective_limits_apply_the_published_multiplier(staff, redis_client):
    """The plan page shows each rate as it is enforced now: 10/min at a multiplier of 0.5 is 5/min."""
    plan = PlanFactory(slug="free")
    EndpointLimitFactory(plan=plan, name="search", scope="search", rates="10/min")
    publish_multipliers(board_of(redis_client), {plan.pk: 0.5}, time.time(), ttl=60)
    page = staff.get(f"/admin/quota_plans/plan/{plan.pk}/change/").content.decode()
    assert 'id="effective-multiplier">0.50<' in page
    assert "<td>10 / 60 s</td><td>5 / 60 s</td>" in page


def test_impossible_inline_limit_is_refused_with_its_message(staff):
    """A weight no window can hold is refused on the inline row, with the model's explanation, and nothing saved."""
    plan = PlanFactory(slug="free", name="Free")
    data = {
        "name": "Free", "slug": "free", "monthly_price": "0", "priority": "0", "ban_threshold": "0",
        "ban_window": "60", "ban_durations": "60,600,3600",
        **inline_management("limits", 1), **inline_management("period_quotas"), **inline_management("budgets"),
        "limits-0-name": "search", "limits-0-scope": "search", "limits-0-algorithm": "fixed_window",
        "limits-0-rates": "2/min", "limits-0-weight": "5", "limits-0-max_delay": "0", "limits-0-price": "0",
    }  # fmt: skip
    response = staff.post(f"/admin/quota_plans/plan/{plan.pk}/change/", data)
    assert response.status_code == 200
    assert "The weight is larger than every rate&#x27;s count: no request could ever pass." in response.content.decode()
    assert not EndpointLimit.objects.exists()


def test_move_subscriptions_to_another_plan_through_an_intermediate_page(staff):
    free, pro = PlanFactory(slug="free", name="Free"), PlanFactory(slug="pro", name="Pro", monthly_price=49)
    limit = EndpointLimitFactory(plan=free, name="global")
    subs = [SubscriptionFactory(plan=free) for _ in range(2)]
    LimitOverride.objects.create(subscription=subs[0], limit=limit, unlimited=True)
    ids = [str(s.pk) for s in subs]
    page = staff.post(CHANGELIST, {"action": "move_to_plan", "_selected_action": ids})
    assert page.status_code == 200
    assert "Move to plan" in page.content.decode()
    assert set(Subscription.objects.values_list("plan__slug", flat=True)) == {"free"}  # nothing moved yet
    done = staff.post(CHANGELIST, {"action": "move_to_plan", "_selected_action": ids, "apply": "1", "plan": pro.pk})
    assert done.status_code == 302
    assert set(Subscription.objects.values_list("plan__slug", flat=True)) == {"pro"}
    assert not LimitOverride.objects.exists()


def test_issue_api_key_shows_the_raw_key_once(staff):
    """The action first asks for an optional expiry (no key yet), then issues and shows the key once."""
    sub = SubscriptionFactory()
    step = {"action": "issue_api_key", "_selected_action": [str(sub.pk)]}
    form = staff.post(CHANGELIST, step)
    assert form.status_code == 200
    assert 'name="expires"' in form.content.decode()
    assert not APIKey.objects.exists()
    response = staff.post(CHANGELIST, {**step, "issue": "1", "expires": ""})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    text = response.content.decode()
    raw = text.split('<code class="raw-key">')[1].split("<")[0]
    key = APIKey.objects.get(key_hash=hash_api_key(raw))
    assert key.subscription == sub
    assert key.expires_at is None
    assert "They do not expire." in text
    assert raw not in staff.get(f"/admin/quota_plans/subscription/{sub.pk}/change/").content.decode()
    assert raw not in staff.get(f"/admin/quota_plans/apikey/{key.pk}/change/").content.decode()
