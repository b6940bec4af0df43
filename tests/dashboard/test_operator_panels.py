"""The overview's budget and adaptive panels as an operator reads them: one row per budget, readable signals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from adaptive.models import AdaptiveSnapshot
from tests.factories import SubscriptionFactory
from usage.models import BudgetAlert

pytestmark = pytest.mark.django_db


def alert(sub, budget: str, threshold: int, spent: int, period_start) -> BudgetAlert:
    return BudgetAlert.objects.create(
        client=f"s.{sub.pk}", subscription=sub, budget=budget, period_start=period_start, threshold=threshold,
        spent_micros=spent, amount_micros=1_000_000,
    )  # fmt: skip


def test_a_budget_that_crossed_both_thresholds_is_one_row_in_its_latest_state(staff):
    """The 80 % alert and the 100 % one of the same day budget are one row, over; another budget stays apart."""
    sub = SubscriptionFactory()
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    alert(sub, "daily", 80, 800_000, today)
    alert(sub, "daily", 100, 1_000_000, today)
    alert(sub, "monthly", 80, 810_000, today.replace(day=1))
    alert(sub, "daily", 100, 1_000_000, today - timedelta(days=1))  # yesterday's: a period of its own
    rows = staff.get("/dashboard/data.json").json()["budgets"]
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
