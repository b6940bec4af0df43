"""A subscription's own alert thresholds are judged where the platform's 80 % and 100 % are (issue 56, item 5):
as the request's spend is settled, once per limit, period and threshold, in the order the spend reached them,
on every store."""

from __future__ import annotations

from decimal import Decimal

import pytest

from notifications.models import Event
from notifications.watch import watch
from plans.models import AlertThresholds, APIKey, CostBudget, Plan, SpendCap, Subscription
from quotas.engine import default_engine
from quotas.internal_api import rules_changed
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def metered(slug: str, day: str) -> object:
    """A plan charging 0.01 a request on /t/priced, with a day budget of ``day``."""
    plan = PlanFactory(slug=slug)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal(day))
    return plan


@pytest.fixture
def acme(db) -> tuple[Subscription, str]:
    """Acme, on a plan of 0.10 a day, wants to hear of 50 % of its spending; its key."""
    subscription = Subscription.objects.create(name="Acme", plan=metered("metered", "0.10"))
    AlertThresholds.objects.create(subscription=subscription, percents=[50])
    return subscription, issue_key(subscription)


def get(client, key: str, **params: str) -> int:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return client.get(f"/t/priced?{query}", HTTP_X_API_KEY=key).status_code


def events(subscription: Subscription) -> list[tuple]:
    """The subscription's money events in the order they were recorded: (type, limit's name, threshold, spent)."""
    rows = Event.objects.filter(subscription=subscription).order_by("created_at", "pk")
    return [(e.type, e.data["budget"], e.data["threshold"], e.data.get("spent")) for e in rows]


def test_a_customer_threshold_comes_before_the_platform_alerts_the_same_spend_reached(client, acme):
    """One request costing the whole day (0.10, estimated 0.02) passes the customer's 50 % and the platform's 80 %
    and 100 % at once: all three are recorded when it is settled, with the settled spend, 50 % first. The
    watcher, looking after, finds nothing left to record."""
    subscription, key = acme
    assert get(client, key, est="0.02") == 200  # 0.02: 20 %
    assert events(subscription) == []
    assert get(client, key, est="0.02", actual="0.08") == 200  # 0.10: 100 %
    assert events(subscription) == [
        ("spend.threshold_reached", "day-budget", 50, "0.100000"),
        ("budget.threshold_crossed", "day-budget", 80, "0.100000"),
        ("budget.threshold_crossed", "day-budget", 100, "0.100000"),
    ]
    (own,) = Event.objects.filter(type="spend.threshold_reached")
    assert own.data["amount"] == "0.100000"
    assert own.data["currency"] == "USD"
    assert own.data["period"] == "day"
    assert watch().recorded == {}


def test_a_threshold_is_reported_by_the_request_whose_settled_spend_reaches_it(client, acme):
    """Estimated past 50 % but settled under it, a request reports nothing (its estimate was not spent); the one
    whose actual cost takes the day to 50 % reports it, with that spend; nothing after reports it again."""
    subscription, key = acme
    assert get(client, key, est="0.06", actual="0.01") == 200  # 0.01 spent, though 0.06 was estimated
    assert get(client, key, est="0.02", fail="1") == 500  # a 5xx: charged nothing
    assert events(subscription) == []
    assert get(client, key, est="0.01", actual="0.04") == 200  # 0.05: 50 %
    assert get(client, key) == 200
    assert events(subscription) == [("spend.threshold_reached", "day-budget", 50, "0.050000")]


def test_a_plan_change_reports_the_new_budgets_thresholds(client, acme):
    """50 % of the old plan's day budget is reported; the plan changes within the day to one whose day budget has
    the same name (another budget, its own counter from 0): its 50 % is reported too, once reached."""
    subscription, key = acme
    assert get(client, key, est="0.05") == 200  # 50 % of the old plan's 0.10
    bigger = metered("bigger", "0.20")
    subscription.plan = bigger
    subscription.save()
    assert get(client, key, est="0.09") == 200  # 45 % of the new plan's 0.20
    assert get(client, key, est="0.01") == 200  # 50 %
    assert events(subscription) == [
        ("spend.threshold_reached", "day-budget", 50, "0.050000"),
        ("spend.threshold_reached", "day-budget", 50, "0.100000"),
    ]
    assert watch().recorded == {}


def test_a_cap_reports_its_thresholds_and_those_of_the_budget_it_lowers(client, acme):
    """A cap of 0.04 on the 0.10 budget: 50 % of the cap at 0.02, and 50 % of the budget only once the day has
    spent 0.05, which the cap never lets it."""
    subscription, key = acme
    SpendCap.objects.create(subscription=subscription, period="day", amount=Decimal("0.04"))
    for _ in range(4):
        assert get(client, key) == 200
    assert get(client, key) == 429
    assert [e for e in events(subscription) if e[0] == "spend.threshold_reached"] == [
        ("spend.threshold_reached", "day-cap", 50, "0.020000")
    ]


def test_a_threshold_set_after_the_spend_passed_it_is_found_by_the_watcher(client, acme):
    """Thresholds set once the day has spent past them: no request crosses them, the watcher's look reports them
    (once) with the spend it found."""
    subscription, key = acme
    assert get(client, key, est="0.03") == 200
    AlertThresholds.objects.filter(subscription=subscription).update(percents=[20, 50])
    assert watch().recorded == {"spend.threshold_reached": 1}
    assert events(subscription) == [("spend.threshold_reached", "day-budget", 20, "0.030000")]
    assert watch().recorded == {}


def test_a_keys_cap_reports_its_thresholds_named_by_the_key(client, acme):
    """A key capped at 0.04 a day: 50 % of its cap at 0.02, named by the key, in the plan's currency."""
    subscription, _ = acme
    row, key = APIKey.issue(subscription)
    row.cap_period, row.cap_amount = "day", Decimal("0.04")
    row.save()
    for _ in range(2):
        assert get(client, key) == 200
    (own,) = Event.objects.filter(type="spend.threshold_reached")
    assert (own.data["budget"], own.data["spent"], own.data["amount"]) == ("key-day-cap", "0.020000", "0.040000")
    assert own.data["key"] == {"id": row.counters_id}
    assert own.data["currency"] == "USD"


def test_an_allowance_reports_its_spend_when_it_ends_not_what_it_reserved(client, acme, set_quotas, quota_clock):
    """A busy client's allowances take its next requests' estimates ahead (the clock stands still, so it is busy
    from its second request): what they reserve crosses no threshold; the 50 % is reported once the spend
    committed reaches it, with that spend, at the latest when the allowances end."""
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=1, HORIZON=10.0, SHARE=1.0, MAX_REQUESTS=4)
    subscription, key = acme
    Plan.objects.filter(pk=subscription.plan_id).update(local_allowances=True)
    rules_changed()
    for _ in range(4):
        assert get(client, key) == 200
    assert default_engine.runtime().guard.allowances.held(f"{{s.{subscription.pk}}}")  # units taken ahead
    assert events(subscription) == []  # at most 0.04 spent, whatever the allowances hold
    for _ in range(2):
        assert get(client, key) == 200
    default_engine.runtime().settle_allowances(everything=True)
    ((kind, name, percent, spent),) = events(subscription)
    assert (kind, name, percent) == ("spend.threshold_reached", "day-budget", 50)
    assert Decimal("0.05") <= Decimal(spent) <= Decimal("0.06")


def test_without_the_settling_middleware_an_admission_reports_its_thresholds_at_once(client, acme, settings):
    """QuotaThrottle without QuotaHeadersMiddleware (quotas.W002): nothing settles the request, so the thresholds
    its spend crossed are reported when it is decided, with the spend it was charged."""
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("QuotaHeadersMiddleware")]
    subscription, key = acme
    assert [get(client, key) for _ in range(5)] == [200] * 5
    assert events(subscription) == [("spend.threshold_reached", "day-budget", 50, "0.050000")]


def test_under_asgi_the_middleware_settles_a_request_of_a_subscription_with_thresholds(acme, settings):
    """The async QuotaHeadersMiddleware settles (in a thread) every admitted request of a subscription with
    thresholds of its own, though nothing else waits: the one that crosses 50 % reports it."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    settings.MIDDLEWARE = ["django.middleware.common.CommonMiddleware", "quotas.middleware.QuotaHeadersMiddleware"]
    subscription, key = acme

    async def scenario():
        client = AsyncClient(raise_request_exception=False)
        return [(await client.get("/t/priced", headers={"x-api-key": key})).status_code for _ in range(5)]

    assert async_to_sync(scenario)() == [200] * 5
    assert events(subscription) == [("spend.threshold_reached", "day-budget", 50, "0.050000")]
