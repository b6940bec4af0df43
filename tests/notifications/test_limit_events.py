"""Each limit's threshold is an event of its own: two keys' caps are two events naming their keys, in the plan's
currency, and a period quota's is in its own unit, with no money fields and no budget alert row."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from notifications.models import Event
from plans.models import APIKey, PeriodQuota
from usage.models import BudgetAlert

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def data_of(event: Event) -> dict:
    return event.data if isinstance(event.data, dict) else json.loads(event.data)


def test_two_keys_reaching_their_own_caps_are_two_events_naming_them(metered, matches_schema):
    """Keys capped at 0.02 a day each spend 0.02 (100 %): two events, one per key, with the plan's currency."""
    keys = []
    for name in ("ci", "batch"):
        key, raw = APIKey.issue(metered.subscription, name=name)
        key.cap_period, key.cap_amount = "day", Decimal("0.02")
        key.save()
        keys.append((key, raw))
    api = APIClient()
    for _, raw in keys:
        assert [api.get("/t/priced", HTTP_X_API_KEY=raw).status_code for _ in range(2)] == [200, 200]
    events = [data_of(e) for e in Event.objects.filter(type="budget.threshold_crossed")]
    capped = sorted((d["key"]["id"], d["threshold"], d["currency"]) for d in events if "key" in d)
    assert capped == sorted((key.pk, threshold, "USD") for key, _ in keys for threshold in (80, 100))
    for event in Event.objects.filter(type="budget.threshold_crossed"):
        body = {"id": str(event.pk), "type": event.type, "created": "2026-11-29T00:00:00Z", "data": data_of(event)}
        assert matches_schema(body) == []


def test_a_period_quota_alerts_in_its_own_unit(metered, matches_schema):
    """A quota of 5 requests a day: its 80 % and 100 % are events in requests (no spent, amount, currency), and
    no budget alert row is written for it."""
    PeriodQuota.objects.create(plan=metered.subscription.plan, name="daily-calls", period="day", units=5)
    api = APIClient()
    assert [api.get("/t/priced", HTTP_X_API_KEY=metered.key).status_code for _ in range(6)] == [200] * 5 + [429]
    quota = [data_of(e) for e in Event.objects.filter(type="budget.threshold_crossed")]
    quota = [d for d in quota if d["budget"] == "daily-calls"]
    assert sorted((d["threshold"], d["unit"], d["used"], d["limit"]) for d in quota) == [
        (80, "requests", 4, 5), (100, "requests", 5, 5)
    ]  # fmt: skip
    assert all("spent" not in d and "currency" not in d for d in quota)
    assert not BudgetAlert.objects.filter(budget="daily-calls").exists()
