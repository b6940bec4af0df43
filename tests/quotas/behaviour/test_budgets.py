"""Money budgets, period quotas, reconciliation, alerts and usage counters."""

from __future__ import annotations

import json
import re
import time
from datetime import date, datetime
from decimal import Decimal

import pytest

from plans.models import CostBudget, PeriodQuota
from quotas.contract.keys import client_tag
from quotas.contract.protocol import decide_args
from quotas.contract.reply_layout import REPLY_HEAD
from quotas.engine import default_engine
from quotas.formats.money import from_micros, to_micros
from quotas.formats.periods import period_bounds
from quotas.identity.clients import Client, hash_api_key
from quotas.signals import budget_threshold_crossed
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, issue_key
from tests.usage_counters import usage_totals

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", monthly_price=Decimal("0"), is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="1000/min", algorithm="token_bucket")
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.05"))
    return plan


@pytest.fixture
def pro(db):
    plan = PlanFactory(slug="pro", monthly_price=Decimal("49"), priority=5)
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("10"))
    return plan


@pytest.fixture
def alerts():
    received = []

    def receiver(**kwargs):
        received.append((kwargs["budget"], kwargs["threshold"], kwargs["spent_micros"]))

    budget_threshold_crossed.connect(receiver, weak=False, dispatch_uid="test-alerts")
    yield received
    budget_threshold_crossed.disconnect(dispatch_uid="test-alerts")


def get(client, key, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return client.get(f"/t/priced?{query}", HTTP_X_API_KEY=key)


def spent(key_tag: str, window_name: str = "day-budget") -> Decimal:
    runtime = default_engine.runtime()
    rules = runtime.rules.current()
    sub = runtime.rules.subscriber_for_key(hash_api_key(key_tag))
    windows = [w for r in rules.limits_for(sub.plan_id, sub) if r.name == window_name for w in r.windows]
    state = runtime.guard.peek(client_tag("s", str(sub.id)), windows).states[0]
    return from_micros(state.used if state.used else state.window.quota - state.remaining)


def test_budget_refuses_while_rate_limit_has_room(client, free, pro):
    """A free key exhausts its daily budget and gets budget_exceeded; the rate limit still has room."""
    key = issue_key(plan=free)
    assert [get(client, key).status_code for _ in range(5)] == [200] * 5
    refused = get(client, key)
    assert refused.status_code == 429
    body = json.loads(refused.content)
    assert body["reason"] == "budget_exceeded"
    assert body["budget"]["name"] == "day-budget"
    assert Decimal(body["budget"]["spent"]) == Decimal("0.05")
    assert Decimal(body["budget"]["amount"]) == Decimal("0.05")
    assert body["budget"]["currency"] == "USD"
    assert body["upgrade"]["plan"] == "pro"
    # Retry-After runs until the day ends (UTC by default).
    end = period_bounds("day", time.time()).end
    assert abs(int(refused["Retry-After"]) - (end - time.time())) <= 2
    # The rate windows, which admitted the request, are not described: only what refused it (the budget, in
    # Retry-After and the body). Nor are they charged by the refusal.
    assert "RateLimit" not in refused
    assert "RateLimit-Policy" not in refused
    assert "X-RateLimit-Remaining" not in refused
    after = get(client, key)
    assert after.status_code == 429
    assert body["retry_after"] == int(refused["Retry-After"])


def test_view_estimate_and_reconciliation(client, free):
    """The estimate is charged first, then replaced by the actual cost, exactly once."""
    key = issue_key(plan=free)
    assert get(client, key, est="0.02", actual="0.005").status_code == 200
    assert spent(key) == Decimal("0.005")
    assert get(client, key, est="0.02", actual="0.03").status_code == 200
    assert spent(key) == Decimal("0.035")


def test_estimate_is_released_when_the_view_fails(client, free):
    key = issue_key(plan=free)
    assert get(client, key, est="0.04", fail=1).status_code == 500
    assert spent(key) == Decimal("0")


def test_estimate_too_large_is_refused_before_the_view_runs(client, free):
    key = issue_key(plan=free)
    response = get(client, key, est="0.06")
    assert response.status_code == 429
    assert json.loads(response.content)["budget"]["requested"] == "0.060000"


def test_alerts_fire_once_per_threshold_and_period(client, free, alerts):
    """80 % and 100 % fire one signal each, however many requests follow."""
    key = issue_key(plan=free)
    for _ in range(4):
        get(client, key)
    assert alerts == [("day-budget", 80, 40000)]
    get(client, key)
    for _ in range(3):
        assert get(client, key).status_code == 429
    assert alerts == [("day-budget", 80, 40000), ("day-budget", 100, 50000)]


def test_a_refusal_reports_100_percent_once_only_near_the_end_of_the_budget(client, free, alerts):
    """70 % spent, a request too big for the rest refused: nothing reported, so the 80 % alert still comes
    when it is reached. A refusal with 80 % or more spent counts as reaching 100 %, once."""
    key = issue_key(plan=free)
    get(client, key, est="0.035")  # 70 %
    assert get(client, key, est="0.025").status_code == 429
    assert alerts == []
    assert get(client, key, est="0.0075").status_code == 200  # 85 %
    assert alerts == [("day-budget", 80, 42500)]
    assert get(client, key, est="0.02").status_code == 429
    assert get(client, key, est="0.02").status_code == 429
    assert alerts == [("day-budget", 80, 42500), ("day-budget", 100, 42500)]


def test_subscription_budget_replaces_the_plans(client, free):
    sub = SubscriptionFactory(plan=free)
    CostBudget.objects.create(subscription=sub, period="day", amount=Decimal("0.10"))
    key = issue_key(sub)
    assert [get(client, key).status_code for _ in range(11)] == [200] * 10 + [429]


def test_daily_and_monthly_budgets_both_apply(client, free):
    CostBudget.objects.create(plan=free, period="month", amount=Decimal("0.03"))
    key = issue_key(plan=free)
    responses = [get(client, key) for _ in range(4)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert json.loads(responses[-1].content)["budget"]["name"] == "month-budget"


def test_period_quota_of_requests(client, free):
    """N requests per calendar day, whatever their weight or price."""
    PeriodQuota.objects.create(plan=free, name="daily", period="day", units=3)
    key = issue_key(plan=free)
    assert [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(4)] == [200, 200, 200, 429]
    response = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert '"daily";q=3;quotas-period="day"' in response["RateLimit-Policy"]  # no w: a day may have 23 or 25 h


def client_usage(redis_client, usage_key) -> dict[str, int]:
    """The one client's counters in a usage hash, without the "<client>|" every field starts with."""
    fields = {k.decode(): int(v) for k, v in redis_client.hgetall(usage_key).items() if not k.startswith(b"~")}
    (client,) = {name.split("|", 1)[0] for name in fields}
    assert re.fullmatch(r"s\.\d+", client)
    return {name.split("|", 1)[1]: value for name, value in fields.items()}


def test_usage_is_counted_in_the_decision(client, free, redis_client):
    """Allowed, denied-by-budget, weight and cost land in the client's usage hash of the day."""
    key = issue_key(plan=free)
    for _ in range(7):
        get(client, key)
    (usage_key,) = list(redis_client.scan_iter(match="*:u:*"))
    # One hash per bucket of clients and day: ...{b<n>}:u:<YYYYMMDD> (UTC on the test machine).
    assert re.search(r"\{b\d+\}:u:" + date.today().strftime("%Y%m%d") + "$", usage_key.decode())
    counts = client_usage(redis_client, usage_key)
    prefix = f"{free.pk}|priced|"
    assert counts[prefix + "a"] == 5
    assert counts[prefix + "db"] == 2
    assert prefix + "wx" not in counts  # one unit each: the weight is the allowed count
    assert counts[prefix + "c"] == to_micros("0.05")
    # It outlives the end of its day (taken at UTC-12, the latest any day ends) by three days.
    assert 86400 * 3.5 * 1000 < redis_client.pttl(usage_key) <= 86400 * 4.5 * 1000


def test_rate_denials_and_shadow_are_counted(client, free, redis_client):
    EndpointLimitFactory(plan=free, name="tight", scope="priced", rates="1/min", algorithm="fixed_window")
    EndpointLimitFactory(plan=free, name="watch", rates="1/hour", shadow=True)
    key = issue_key(plan=free)
    get(client, key)
    get(client, key)
    (usage_key,) = list(redis_client.scan_iter(match="*:u:*"))
    counts = client_usage(redis_client, usage_key)
    assert counts[f"{free.pk}|priced|a"] == 1
    assert counts[f"{free.pk}|priced|dr"] == 1
    assert counts[f"{free.pk}|priced|sw"] == 1


def test_server_clock_picks_the_next_period(runtime):
    """The application sends this and the next period; Redis time chooses."""
    from quotas.formats.rates import Rate
    from quotas.rules.limits import LimitRule

    rule = LimitRule(id="b1", name="day-budget", rates=(Rate(100, 86400),), algorithm="budget", period="day")
    window = rule.windows[0]
    day0 = period_bounds("day", 1_700_000_000)
    spec = window.spec_at(1_700_000_000)
    keys = runtime.store.script_keys(runtime.store.keys_of("{c}"), [window])

    def decide(now_us: int, cost: int) -> list[int]:
        return runtime.store.transport.script("decide")(
            keys=keys, args=decide_args("c|", now=now_us, cost=cost, specs=[spec])
        )

    first = decide(day0.start * 10**6 + 5, 100)
    assert first[0] == 1  # the whole day's budget spent
    refused = decide(day0.start * 10**6 + 6, 1)
    assert refused[0] == 0
    # Same spec (an app clock still in day 0), but the server is already in day 1.
    next_day = decide(day0.end * 10**6 + 1, 1)
    assert next_day[0] == 1
    assert next_day[REPLY_HEAD + 2] == (day0.next_end - day0.end) * 10**6 - 1  # reset: to the end of day 1


@pytest.mark.parametrize(
    ("kind", "today", "anchor", "start", "end"),
    [
        ("day", date(2026, 3, 5), 1, date(2026, 3, 5), date(2026, 3, 6)),
        ("week", date(2026, 3, 5), 1, date(2026, 3, 2), date(2026, 3, 9)),
        ("month", date(2026, 12, 31), 1, date(2026, 12, 1), date(2027, 1, 1)),
        ("billing_month", date(2026, 3, 20), 15, date(2026, 3, 15), date(2026, 4, 15)),
        ("billing_month", date(2026, 3, 10), 15, date(2026, 2, 15), date(2026, 3, 15)),
        ("billing_month", date(2026, 2, 28), 31, date(2026, 2, 28), date(2026, 3, 31)),
        ("billing_month", date(2026, 4, 29), 31, date(2026, 3, 31), date(2026, 4, 30)),
    ],
)
def test_period_bounds(kind, today, anchor, start, end):
    """Calendar periods; billing months renew on the anchor day, clamped to short months."""
    from datetime import UTC, datetime

    now = datetime(today.year, today.month, today.day, 12, tzinfo=UTC).timestamp()
    bounds = period_bounds(kind, now, "UTC", anchor)
    assert datetime.fromtimestamp(bounds.start, UTC).date() == start
    assert datetime.fromtimestamp(bounds.end, UTC).date() == end


def test_periods_follow_the_configured_time_zone():
    from datetime import UTC, datetime

    now = datetime(2026, 3, 5, 23, 30, tzinfo=UTC).timestamp()  # already 6 March in Tokyo
    tokyo = period_bounds("day", now, "Asia/Tokyo")
    assert datetime.fromtimestamp(tokyo.start, UTC) == datetime(2026, 3, 5, 15, tzinfo=UTC)


def test_money_never_goes_through_floats():
    assert to_micros(Decimal("0.0000015")) == 2
    assert to_micros("19.99") == 19_990_000
    assert from_micros(1) == Decimal("0.000001")
    with pytest.raises(TypeError, match="not float"):
        to_micros(0.1)


def test_negative_or_invalid_budget_is_refused_by_validation(free):
    from django.core.exceptions import ValidationError

    budget = CostBudget(plan=free, period="week", amount=Decimal("-1"), currency="usd")
    with pytest.raises(ValidationError) as info:
        budget.full_clean()
    assert {"amount", "currency", "period"} <= set(info.value.message_dict)


def test_current_standing_reads_without_consuming(client, free, pro):
    """The standing shows limits and budgets, offers an upgrade near a limit, and spends nothing."""
    from quotas.standing import current_standing

    sub = SubscriptionFactory(plan=free)
    key = issue_key(sub)
    for _ in range(4):
        get(client, key)
    runtime = default_engine.runtime()
    subscriber = runtime.rules.subscriber_for_key(hash_api_key(key))
    who = Client("subscription", str(sub.pk), client_tag("s", str(sub.pk)), subscriber)
    first = current_standing(who, runtime.rules.current(), runtime)
    second = current_standing(who, runtime.rules.current(), runtime)
    assert first == second  # peeking consumed nothing
    assert first["plan"]["slug"] == "free"
    (budget,) = first["budgets"]
    assert (budget["spent"], budget["amount"], budget["remaining"]) == ("0.040000", "0.050000", "0.010000")
    assert {limit["name"] for limit in first["limits"]} == {"global", "priced"}
    assert first["upgrade"]["slug"] == "pro"
    assert first["upgrade"]["because"] == "day-budget"
    assert get(client, key).status_code == 200  # the fifth request still fits


def test_requests_no_limit_applies_to_are_still_counted(client, free, redis_client):
    """An unlimited override lifts the limits, not the accounting."""
    from plans.models import LimitOverride

    sub = SubscriptionFactory(plan=free)
    LimitOverride.objects.create(subscription=sub, limit=free.limits.get(name="global"), unlimited=True)
    key = issue_key(sub)
    for _ in range(3):
        assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200
    default_engine.runtime().tick()  # the poller's visit: the requests an allowance served go into usage
    (usage_key,) = list(redis_client.scan_iter(match="*:u:*"))
    assert client_usage(redis_client, usage_key)[f"{free.pk}|-|a"] == 3


def test_usage_weight_is_the_sum_of_the_weights_admitted(runtime, redis_client):
    """One-unit requests write no weight counter; heavier and zero-weight ones write what differs from one."""
    from quotas.formats.rates import parse_rates
    from quotas.rules.limits import LimitRule
    from quotas.store.usage_hash_format import read_snapshot, scan_usage_keys

    windows = LimitRule(id="w", name="w", rates=parse_rates("1000/min"), algorithm="token_bucket").windows
    for weight in (1, 3, 3, 0, None):  # None: the window's own weight (1)
        assert runtime.guard.decide("{s.77}", windows, weight=weight, usage="5|-").allowed
    today = date.today()  # UTC on the test machine
    (key,) = scan_usage_keys(redis_client, runtime.prefix, [today])
    (row,) = read_snapshot(redis_client, runtime.prefix, [key]).rows.values()
    assert row["allowed"] == 5
    assert row["weight"] == 1 + 3 + 3 + 0 + 1


def test_reconciling_after_the_period_ended_leaves_the_new_period_alone(runtime):
    """A decision admitted at 23:59:59.9 and reconciled after midnight changes only its own day.

    Before the fix, A's reconciliation wrote the old day's state over the new
    day's, so B's 60 was forgotten and C's 90 admitted: 150 spent in one day.
    """
    from quotas.formats.rates import Rate
    from quotas.rules.limits import LimitRule

    rule = LimitRule(id="b1", name="day-budget", rates=(Rate(100, 86400),), algorithm="budget", period="day")
    windows = list(rule.windows)
    day0 = period_bounds("day", 1_700_000_000)
    a = runtime.guard.decide("{boundary}", windows, now=day0.end - 0.1, cost_micros=10)
    assert a.allowed
    b = runtime.guard.decide("{boundary}", windows, now=day0.end + 1, cost_micros=60)
    assert b.allowed
    assert b.states[0].used == 60
    runtime.guard.settlement.reconcile(a, 20)  # A actually cost 20: +10 on day 0, which has ended
    c = runtime.guard.decide("{boundary}", windows, now=day0.end + 2, cost_micros=90)
    assert not c.allowed
    assert runtime.guard.decide("{boundary}", windows, now=day0.end + 3, cost_micros=40).states[0].used == 100


def test_reconciling_within_the_period_adds_the_difference(runtime):
    """The ordinary case still works: the estimate is replaced by the actual cost."""
    from quotas.formats.rates import Rate
    from quotas.rules.limits import LimitRule

    rule = LimitRule(id="b1", name="day-budget", rates=(Rate(100, 86400),), algorithm="budget", period="day")
    windows = list(rule.windows)
    day0 = period_bounds("day", 1_700_000_000)
    a = runtime.guard.decide("{same-day}", windows, now=day0.start + 10, cost_micros=10)
    runtime.guard.settlement.reconcile(a, 25)
    assert a.states[0].used == 25
    assert runtime.guard.decide("{same-day}", windows, now=day0.start + 20, cost_micros=75).allowed
    assert not runtime.guard.decide("{same-day}", windows, now=day0.start + 30, cost_micros=1).allowed


def test_allow_listed_requests_are_charged_and_reconciled(client, free, redis_client):
    """An allow-list entry skips limits and budgets, not the accounting: cost is counted, then reconciled."""
    from plans.models import ACLEntry

    ACLEntry.objects.create(action="allow", cidr="198.51.100.0/24", reason="partner")
    for _ in range(10):  # ten times the day's 0.05 budget: the allow list lifts it
        response = client.get("/t/priced?est=0.02&actual=0.03", REMOTE_ADDR="198.51.100.7")
        assert response.status_code == 200
    totals = usage_totals(redis_client)
    assert totals["a"] == 10
    assert totals["c"] == to_micros(Decimal("0.30"))
    client.get("/t/priced", REMOTE_ADDR="198.51.100.7")  # no estimate: the limit's price, 0.01
    assert usage_totals(redis_client)["c"] == to_micros(Decimal("0.31"))


def test_unlimited_requests_are_charged_and_reconciled(client, redis_client):
    """Under an unlimited override the estimate is counted and then replaced by the actual cost."""
    from plans.models import LimitOverride

    plan = PlanFactory(slug="metered", is_default=True)
    priced = EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1/min", price=Decimal("0.01"))
    sub = SubscriptionFactory(plan=plan)
    LimitOverride.objects.create(subscription=sub, limit=priced, unlimited=True)
    key = issue_key(sub)
    for _ in range(3):
        assert get(client, key, est="0.02", actual="0.005").status_code == 200
    totals = usage_totals(redis_client)
    assert totals["a"] == 3
    assert totals["c"] == to_micros(Decimal("0.015"))


def test_a_request_that_can_never_fit_its_budget_says_so_without_a_retry_after(client, free, pro):
    """An estimate (0.08) above the whole daily budget (0.05): no wait would help, so no Retry-After, and a
    problem type that says why, naming the estimate and the budget."""
    key = issue_key(plan=free)
    refused = get(client, key, est="0.08")
    assert refused.status_code == 429
    assert "Retry-After" not in refused
    assert "RateLimit" not in refused
    body = json.loads(refused.content)
    assert body["type"].endswith("request-exceeds-budget")
    assert body["reason"] == "request_exceeds_budget"
    assert "retry_after" not in body
    assert body["budget"] == {
        "name": "day-budget", "period": "day", "currency": "USD", "amount": "0.050000", "requested": "0.080000",
    }  # fmt: skip
    assert "can never be admitted" in body["detail"]
    assert body["upgrade"]["plan"] == "pro"
    assert spent(key) == 0  # nothing charged
    assert get(client, key, est="0.01").status_code == 200  # a request that fits is admitted


def test_a_budget_refusal_retry_after_agrees_with_its_reset_time(client, free):
    key = issue_key(plan=free)
    for _ in range(5):
        get(client, key)
    refused = get(client, key)
    body = json.loads(refused.content)
    resets_at = datetime.fromisoformat(body["budget"]["resets_at"]).timestamp()
    assert abs((time.time() + int(refused["Retry-After"])) - resets_at) <= 2
    assert body["retry_after"] == int(refused["Retry-After"])


def test_an_unlimited_override_lifts_the_rate_not_the_price(client, free):
    """Price 0.01, budget 0.05 a day: a subscriber whose priced limit is lifted is still charged the list
    price and refused by the budget after 5 requests, like a plain subscriber (the rate no longer refuses)."""
    from plans.models import LimitOverride

    plain = issue_key(plan=free)
    sub = SubscriptionFactory(plan=free)
    LimitOverride.objects.create(subscription=sub, limit=free.limits.get(name="priced"), unlimited=True)
    lifted = issue_key(sub)
    for key in (plain, lifted):
        codes = [get(client, key).status_code for _ in range(6)]
        assert codes == [200] * 5 + [429], key
        assert spent(key) == Decimal("0.05")
    assert json.loads(get(client, lifted).content)["reason"] == "budget_exceeded"


@pytest.mark.parametrize(
    "allowances",
    [
        {"ENABLED": True},  # the shipped defaults
        {"ENABLED": True, "MIN_RATE": 1, "HORIZON": 5.0, "SHARE": 1.0, "MAX_REQUESTS": 100},  # tuned to grant big
    ],
    ids=["defaults", "tuned"],
)
def test_allowances_never_take_a_budget_past_its_bound(client, set_quotas, allowances):
    """Price 0.01 but an actual cost of 0.30, a budget of 1.00, requests one at a time: an upward
    reconciliation ends the client's allowances, so the budget is overspent by at most one request's
    actual minus estimate (0.29), as with allowances off."""
    set_quotas("ALLOWANCES", **allowances)
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1.00"))
    key = issue_key(plan=plan)
    admitted = 0
    for _ in range(20):
        response = get(client, key, actual="0.30")
        if response.status_code != 200:
            assert response.status_code == 429
            break
        admitted += 1
    default_engine.runtime().settle_allowances(everything=True)  # what allowances held back goes back
    assert spent(key) <= Decimal("1.00") + Decimal("0.29")
    assert spent(key) == Decimal("0.30") * admitted  # each request charged its actual cost, once
    # At most 0.30 x 3 = 0.90 spent, and the fourth fits its 0.01 estimate. (Fewer while an ended allowance
    # still holds units back: the client is held under its budget until the poller gives them back.)
    assert 1 <= admitted <= 4


def test_a_receiver_that_raises_never_fails_the_request_nor_keeps_its_lease(client, free, caplog):
    """A budget_threshold_crossed receiver that raises is logged; the requests are answered 200 (each charged
    once, its view run), and a concurrency lease of one is released after each."""
    from quotas.signals import budget_threshold_crossed

    EndpointLimitFactory(plan=free, name="inflight", scope="priced", rates="1/30s", algorithm="concurrency")

    def broken(**kwargs):
        raise RuntimeError("the alert receiver is broken")

    budget_threshold_crossed.connect(broken, weak=False, dispatch_uid="test-broken")
    try:
        key = issue_key(plan=free)
        codes = [get(client, key).status_code for _ in range(5)]
    finally:
        budget_threshold_crossed.disconnect(dispatch_uid="test-broken")
    assert codes == [200] * 5  # 80 % at the fourth, 100 % at the fifth: both receivers raised
    assert spent(key) == Decimal("0.05")
    assert sum("a receiver of budget_threshold_crossed failed" in r.getMessage() for r in caplog.records) == 2


def test_an_alert_is_filed_under_the_period_its_decision_was_in():
    """A reconciliation that lands after midnight reports the threshold of the day the request was made in."""
    from datetime import UTC

    from quotas.formats.rates import Rate
    from quotas.observability.events import fire_budget_alerts
    from quotas.rules.limits import LimitRule
    from quotas.store.decision import WindowState

    received = []

    def receiver(**kwargs):
        received.append(kwargs["period_start"])

    budget_threshold_crossed.connect(receiver, weak=False, dispatch_uid="test-period")
    try:
        window = LimitRule("b", "day-budget", (Rate(1_000_000, 86_400),), algorithm="budget", period="day").windows[0]
        yesterday = datetime(2026, 11, 24, 23, 59, 59, tzinfo=UTC).timestamp()
        fire_budget_alerts("{s.1}", 1, [WindowState(window, True, 0, 0, 0, used=900_000, alert=1)], yesterday)
    finally:
        budget_threshold_crossed.disconnect(dispatch_uid="test-period")
    assert received == [datetime(2026, 11, 24, tzinfo=UTC)]


@pytest.mark.redis_only  # counts script calls in Redis's command statistics
@pytest.mark.parametrize("allowances", [False, True], ids=["allowances off", "allowances at their defaults"])
def test_both_alerts_come_with_allowances_on_or_off(client, alerts, set_quotas, redis_client, allowances):
    """Thresholds an allowance's grant crosses are reported by the request that took it: 80 % then 100 %,
    one each, whether the requests are decided in Redis one by one or served from allowances."""
    from tests.script_calls import script_calls

    set_quotas("ALLOWANCES", ENABLED=allowances)
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="10000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1.00"))
    key = issue_key(plan=plan)
    redis_client.config_resetstat()
    codes = [get(client, key).status_code for _ in range(110)]
    default_engine.runtime().settle_allowances(everything=True)
    assert 90 <= codes.count(200) <= 100
    if allowances:
        assert script_calls(redis_client) < 100  # some requests were served from allowances
    assert [threshold for _, threshold, _ in alerts] == [80, 100]


def test_money_converts_whatever_the_decimal_context():
    """A project that lowered its decimal precision does not change what is charged."""
    from decimal import localcontext

    with localcontext() as context:
        context.prec = 6
        assert to_micros(Decimal("1234.567891")) == 1_234_567_891
        assert from_micros(1_234_567_891) == Decimal("1234.567891")


def test_a_price_saved_through_the_orm_rounds_as_an_estimate_does(client):
    """0.0000125 is 13 micro-units whether it is a limit's price or a view's estimate (half up, both)."""
    plan = PlanFactory(slug="metered", is_default=True)
    limit = EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.0000125"))
    limit.refresh_from_db()
    assert limit.price == Decimal("0.000013")
    assert to_micros(Decimal("0.0000125")) == 13
    budget = CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.0000125"))
    budget.refresh_from_db()
    assert budget.amount == Decimal("0.000013")


def test_a_budget_of_zero_reports_nothing_for_free_requests_and_100_percent_once_when_it_refuses(client, alerts):
    plan = PlanFactory(slug="zero", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0"))
    key = issue_key(plan=plan)
    assert [get(client, key).status_code for _ in range(3)] == [200] * 3  # free requests fit a budget of 0
    assert alerts == []
    assert get(client, key, est="0.01").status_code == 429
    assert get(client, key, est="0.01").status_code == 429
    assert alerts == [("day-budget", 100, 0)]


def test_after_an_overshoot_the_refusal_and_the_standing_show_what_was_spent(client, free):
    """Estimated 0.01, cost 0.09 (the overspend window): 0.09 spent of 0.05 is said as it is, not as 0.05."""
    key = issue_key(plan=free)
    assert get(client, key, actual="0.09").status_code == 200
    refused = get(client, key)
    assert refused.status_code == 429
    assert json.loads(refused.content)["budget"]["spent"] == "0.090000"
    current = client.get("/api/v1/usage/current", HTTP_X_API_KEY=key).json()
    (budget,) = current["budgets"]
    assert budget["spent"] == "0.090000"
