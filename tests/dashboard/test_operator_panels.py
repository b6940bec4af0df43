"""The overview's budget and adaptive panels as an operator reads them: one row per budget, readable signals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client as DjangoClient
from django.utils import timezone

from adaptive.models import AdaptiveSnapshot
from dashboard.budgets import alert_rows
from demo.seed import demo_key
from quotas.engine import default_engine
from quotas.internal_api import usage_date
from tests.factories import PlanFactory, SubscriptionFactory
from usage.models import BudgetAlert, UsageRecord

pytestmark = pytest.mark.django_db


def alert(sub, budget: str, threshold: int, spent: int, period_start) -> BudgetAlert:
    return BudgetAlert.objects.create(
        client=f"s.{sub.pk}", subscription=sub, budget=budget, period_start=period_start, threshold=threshold,
        spent_micros=spent, amount_micros=1_000_000,
    )  # fmt: skip


def test_a_budget_that_crossed_both_thresholds_is_one_row_in_its_latest_state():
    """Without Redis, from the alert rows: the 80 % alert and the 100 % one of the same day budget are one row,
    over; another budget stays apart."""
    sub = SubscriptionFactory()
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    alert(sub, "daily", 80, 800_000, today)
    alert(sub, "daily", 100, 1_000_000, today)
    alert(sub, "monthly", 80, 810_000, today.replace(day=1))
    alert(sub, "daily", 100, 1_000_000, today - timedelta(days=1))  # yesterday's: a period of its own
    rows = alert_rows(today.date())  # what the panel shows while Redis cannot be read
    assert sorted((r["budget"], r["period_start"], r["over"]) for r in rows) == sorted([
        ("daily", today.date().isoformat(), True),
        ("monthly", today.replace(day=1).date().isoformat(), False),
        ("daily", (today - timedelta(days=1)).date().isoformat(), True),
    ])  # fmt: skip
    (today_row,) = [r for r in rows if r["budget"] == "daily" and r["period_start"] == today.date().isoformat()]
    assert (today_row["threshold"], today_row["spent"]) == (100, "1.000000")


def test_signals_read_as_the_page_reads_values_and_say_why_one_is_missing(staff):
    """Fractions as percentages, the Redis latency in ms, and the missing database signal with its reason."""
    AdaptiveSnapshot.objects.create(
        level=0.8, reason="cpu high", multipliers={}, signals={"cpu": 0.0302, "memory": 0.052, "db": None}
    )
    signals = staff.get("/dashboard/data.json").json()["adaptive"]["signals"]
    assert signals[:2] == [
        {"name": "CPU", "value": "3.0 %", "note": ""}, {"name": "Memory", "value": "5.2 %", "note": ""},
    ]  # fmt: skip
    assert signals[2]["name"] == "Database connections"
    assert signals[2]["value"] == "not measured"
    assert signals[2]["note"]  # the database's vendor, the missing pool, or where to read why
    assert "{" not in str([s["value"] + s["note"] for s in signals])


def test_an_upgrade_candidate_counts_each_refusal_reason(staff):
    """Refused 3 times by a rate limit and 2 by a budget: the row says so, not "5 (rate limit)"."""
    PlanFactory(slug="bigger", monthly_price=50)
    sub = SubscriptionFactory(plan=PlanFactory(slug="small", monthly_price=5))
    for scope, rate, budget in (("search", 3, 0), ("export", 0, 2)):
        UsageRecord.objects.create(
            client=f"s.{sub.pk}", subscription=sub, plan=sub.plan, plan_key=sub.plan_id, scope=scope,
            day=usage_date(timezone.now()), allowed=1, denied_rate=rate, denied_budget=budget,
            observed_at=timezone.now(),
        )  # fmt: skip
    [row] = staff.get("/dashboard/data.json").json()["upgrades"]
    assert (row["denied"], row["denied_by"], row["upgrade_to"]) == (5, {"rate": 3, "budget": 2}, "Bigger")


def test_a_budget_spent_with_no_alert_row_is_listed_from_live_spend(staff, demo, redis_client):
    """The free customer spends 0.408 of its 0.50 day budget (two generations of 0.204, estimated at 0.25 each,
    so a third is refused); with its alert rows gone (spend from before the usage app was installed writes
    none), the panel still lists it, near, from the ledger."""
    client = DjangoClient()
    prompt = {"prompt": "x" * 4000}
    codes = [
        client.post(
            "/api/demo/generate", prompt, HTTP_X_API_KEY=demo_key("free"), content_type="application/json"
        ).status_code
        for _ in range(3)
    ]
    assert codes == [200, 200, 429]
    default_engine.runtime().tick()  # the key's use reaches Redis, as the engine's poller does every second
    BudgetAlert.objects.all().delete()
    rows = {(r["name"], r["budget"]): r for r in staff.get("/dashboard/data.json").json()["budgets"]}
    day = rows["Demo Free customer", "day-budget"]
    assert (day["over"], day["spent_text"], day["amount_text"]) == (False, "0.41 USD", "0.50 USD")
    assert (day["spent"], day["used"]) == ("0.408100", 0.8162)
    assert day["resets_at"].endswith("T00:00:00+00:00")
    assert ("Demo Free customer", "month-budget") not in rows  # 8 %: not near
