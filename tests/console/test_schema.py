"""The console's spend answers match their OpenAPI schema exactly (drf-spectacular's, as served at /api/schema/):
``GET .../caps`` and a key's ``GET .../limits``, each with ``spent``, ``remaining``, ``resets_at`` and ``state``,
documented, with no undocumented field (every object closed, as tests/usage/test_schema_bodies does)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from jsonschema import Draft202012Validator
from rest_framework.test import APIClient

from plans.models import APIKey, CostBudget, SpendCap
from tests.factories import EndpointLimitFactory
from tests.usage.test_schema_bodies import assert_valid, json_schema

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def validator(schema: dict, path: str) -> Draft202012Validator:
    body = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return Draft202012Validator({**json_schema(body), "$defs": json_schema(schema["components"]["schemas"])})


def test_the_caps_and_a_keys_limits_match_the_schema_with_their_spend(team, owner_api):
    plan = team.subscription.plan
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.10"))
    CostBudget.objects.create(plan=plan, period="month", amount=Decimal("1.00"))
    SpendCap.objects.create(subscription=team.subscription, period="day", amount=Decimal("0.05"))
    key, raw = APIKey.issue(team.subscription, name="ci")
    key.cap_period, key.cap_amount = "day", Decimal("0.02")
    key.save()
    assert APIClient().get("/t/priced", HTTP_X_API_KEY=raw).status_code == 200
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    prefix = "/api/v1/subscriptions/{subscription_id}"

    caps = owner_api.get(team.url("caps")).json()
    assert [(p["spent"], p["state"]) for p in caps["periods"]] == [("0.010000", "ok"), ("0.010000", "ok")]
    assert_valid(validator(schema, f"{prefix}/caps"), caps)
    period = schema["components"]["schemas"]["Period"]
    assert {"spent", "remaining", "resets_at", "state"} <= set(period["properties"])

    limits = owner_api.get(team.url(f"keys/{key.pk}/limits")).json()
    assert (limits["cap"]["spent"], limits["cap"]["remaining"]) == ("0.010000", "0.010000")
    assert_valid(validator(schema, f"{prefix}/keys/{{key_id}}/limits"), limits)
