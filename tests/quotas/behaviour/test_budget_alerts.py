"""Budget alerts report spend that was charged, and only that (issue 44, items 2 and 10), on every store."""

from __future__ import annotations

from decimal import Decimal

import pytest

from plans.models import CostBudget
from quotas.signals import budget_threshold_crossed
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def alerts():
    """The alerts sent, as (threshold, spent in micro-units)."""
    received = []

    def receiver(**kwargs):
        received.append((kwargs["threshold"], kwargs["spent_micros"]))

    budget_threshold_crossed.connect(receiver, weak=False, dispatch_uid="test-budget-alerts")
    yield received
    budget_threshold_crossed.disconnect(dispatch_uid="test-budget-alerts")


@pytest.fixture
def daily(db):
    """0.01 a request on /t/priced, 1000 a minute, and 0.05 a day."""
    plan = PlanFactory(slug="daily", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.05"))
    return plan


def get(client, key, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return client.get(f"/t/priced?{query}", HTTP_X_API_KEY=key)


def spent(client, key) -> Decimal:
    (budget,) = client.get("/api/v1/usage/current", HTTP_X_API_KEY=key).json()["budgets"]
    return Decimal(budget["spent"])


def test_a_request_the_rate_limit_refuses_sends_no_budget_alert(client, alerts, runtime):
    """The new user's plan: 3 a day at 0.01 and 0.04 a day. Three requests spend 0.03 (75 %); the fourth,
    refused by the rate limit, is charged nothing and reports nothing. Once the limit is raised, the next
    admitted request crosses 80 % and 100 % for real, and the alerts carry the 0.04 then spent.

    A day's window, raised rather than waited out: Redis's clock cannot be moved, and a window of a second
    would have to be (the test shares its day with the budget's anyway)."""
    plan = PlanFactory(slug="starter", is_default=True)
    limit = EndpointLimitFactory(
        plan=plan, name="priced", scope="priced", rates="3/day", algorithm="fixed_window", price=Decimal("0.01")
    )
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.04"))
    key = issue_key(plan=plan)
    assert [get(client, key).status_code for _ in range(4)] == [200, 200, 200, 429]
    assert alerts == []
    assert spent(client, key) == Decimal("0.03")
    limit.rates = "4/day"  # room for one more in the same window
    limit.save()
    runtime.rules.invalidate()
    assert get(client, key).status_code == 200
    assert alerts == [(80, 40_000), (100, 40_000)]
    assert spent(client, key) == Decimal("0.04")


def test_a_failed_request_sends_no_alert_and_the_real_crossing_is_reported(client, daily, alerts):
    """60 % spent; a request that would reach 80 % fails (500): its estimate is released, so it reports
    nothing. The request that really reaches 80 % does, with the 0.04 spent."""
    key = issue_key(plan=daily)
    assert [get(client, key).status_code for _ in range(3)] == [200] * 3
    assert get(client, key, fail=1).status_code == 500
    assert alerts == []
    assert spent(client, key) == Decimal("0.03")
    assert get(client, key).status_code == 200
    assert alerts == [(80, 40_000)]
    assert get(client, key).status_code == 200
    assert alerts == [(80, 40_000), (100, 50_000)]


def test_an_alert_reports_the_settled_cost_not_the_estimate(client, daily, alerts):
    """60 % spent; a request estimated 0.02 (100 %) costs 0.01: it reports 80 % with the 0.04 it spent, and
    100 % is reported by the request that reaches it."""
    key = issue_key(plan=daily)
    assert [get(client, key).status_code for _ in range(3)] == [200] * 3
    assert get(client, key, est="0.02", actual="0.01").status_code == 200
    assert alerts == [(80, 40_000)]
    assert get(client, key).status_code == 200
    assert alerts == [(80, 40_000), (100, 50_000)]


def test_a_cost_above_the_estimate_reports_what_it_crossed_once(client, daily, alerts):
    """An actual cost past the estimate crosses 80 % and 100 % at settlement: both reported, once."""
    key = issue_key(plan=daily)
    assert get(client, key, est="0.01", actual="0.06").status_code == 200
    assert alerts == [(80, 60_000), (100, 60_000)]
    assert get(client, key).status_code == 429
    assert alerts == [(80, 60_000), (100, 60_000)]


def test_without_the_settling_middleware_an_admission_reports_its_thresholds_at_once(client, daily, alerts, settings):
    """QuotaThrottle without QuotaHeadersMiddleware (warned by quotas.W002): nothing settles the request, so its
    thresholds are sent when it is decided, with the spend it was charged."""
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("QuotaHeadersMiddleware")]
    key = issue_key(plan=daily)
    assert [get(client, key).status_code for _ in range(5)] == [200] * 5
    assert alerts == [(80, 40_000), (100, 50_000)]


def test_under_asgi_the_middleware_settles_a_request_that_has_thresholds_to_report(daily, alerts, settings):
    """The async QuotaHeadersMiddleware settles (in a thread) an admitted request that reached a threshold, even
    with nothing else to settle: its alert is sent."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    # Only middleware that runs async, so that under ASGI QuotaHeadersMiddleware takes its async path.
    settings.MIDDLEWARE = ["django.middleware.common.CommonMiddleware", "quotas.middleware.QuotaHeadersMiddleware"]
    key = issue_key(plan=daily)

    async def scenario():
        client = AsyncClient(raise_request_exception=False)
        return [(await client.get("/t/priced", headers={"x-api-key": key})).status_code for _ in range(5)]

    assert async_to_sync(scenario)() == [200] * 5
    assert alerts == [(80, 40_000), (100, 50_000)]


# The engine: what decide.lua and adjust.lua report, whichever process settles first.

TAG = "{s.1}"


def budget(amount: int):
    from quotas.formats.rates import Rate
    from quotas.rules.limits import LimitRule

    return LimitRule("b", "day-budget", (Rate(amount, 86_400),), algorithm="budget", period="day").windows


def decide(runtime, windows, cost: int, multiplier: float = 1.0):
    from quotas.store.decision import DecideCall

    return runtime.guard.decide_call(DecideCall(TAG, windows, cost_micros=cost, multiplier=multiplier))


def reported(decision) -> list[tuple[int, int]]:
    """The (alert mask, spend) of each budget that has thresholds to report."""
    return [(s.alert, s.used) for s in decision.states if s.alert]


def test_a_refusal_under_reduced_capacity_reports_the_budget_as_it_was(runtime):
    """A rate window the adaptive multiplier shrank refuses (503): the budget that would have admitted the
    request reports the 0.70 it holds, and no threshold."""
    from quotas.formats.rates import Rate
    from quotas.rules.limits import LimitRule

    rate = LimitRule("r", "global", (Rate(2, 60),), algorithm="fixed_window").windows
    windows = [*rate, *budget(1_000_000)]
    assert decide(runtime, windows, 700_000).allowed
    refused = decide(runtime, windows, 200_000, multiplier=0.5)
    assert (refused.allowed, refused.reduced_only) == (False, True)
    state = refused.states[1]
    assert (state.ok, state.used, state.remaining, state.alert) == (True, 700_000, 300_000, 0)
    assert runtime.guard.peek(TAG, windows[1:]).states[0].used == 700_000


def test_a_refund_takes_back_only_the_thresholds_its_request_raised(runtime):
    """A reaches 80 %, B then 100 %. A fails (refunded): B raised the level past A's since, so A's 80 % stands and
    is reported (with the spend as settled, 0.15). B fails too: its 100 % goes back; the request that reaches
    100 % reports it, and 80 % is not reported twice."""
    windows = budget(1_000_000)
    a = decide(runtime, windows, 850_000)
    b = decide(runtime, windows, 150_000)
    assert (reported(a), reported(b)) == ([(1, 850_000)], [(2, 1_000_000)])
    runtime.guard.settlement.reconcile(a, 0)
    assert reported(a) == [(1, 150_000)]
    runtime.guard.settlement.reconcile(b, 0)
    assert reported(b) == []
    c = decide(runtime, windows, 1_000_000)
    assert reported(c) == [(2, 1_000_000)]


def test_the_later_request_settling_first_leaves_the_earlier_ones_threshold(runtime):
    """A reaches 80 %, B 100 %. B fails first: the level goes back to A's 80 %. A then costs less than it
    estimated (0.5 spent): its 80 % goes back too, and the request that reaches 80 % reports it."""
    windows = budget(1_000_000)
    a = decide(runtime, windows, 800_000)
    b = decide(runtime, windows, 200_000)
    runtime.guard.settlement.reconcile(b, 0)
    assert reported(b) == []
    runtime.guard.settlement.reconcile(a, 500_000)
    assert reported(a) == []
    c = decide(runtime, windows, 300_000)
    assert reported(c) == [(1, 800_000)]
