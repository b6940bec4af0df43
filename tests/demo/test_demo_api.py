"""The demo API with the seeded plans: what `make run` shows a newcomer."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from demo.seed import PLANS_FILE, demo_key
from plans.models import EndpointLimit

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded():
    call_command("seed_demo", stdout=io.StringIO())


@pytest.fixture
def client():
    return APIClient()


def test_free_key_gets_200_then_429_with_retry_after_on_a_burst(client, seeded):
    key = demo_key("free")
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200
    codes = [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(15)]
    assert 429 in codes
    refused = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1


def test_pro_key_has_more_room(client, seeded):
    key = demo_key("pro")
    assert {client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(20)} == {200}


def test_search_is_scoped(client, seeded):
    response = client.get("/api/demo/search?q=hello", HTTP_X_API_KEY=demo_key("free"))
    assert response.status_code == 200
    assert '"search";q=10;w=60' in response["RateLimit-Policy"]


def test_generate_spends_more_for_bigger_prompts(client, seeded):
    key = demo_key("free")
    small = client.post("/api/demo/generate", {"prompt": "hi"}, format="json", HTTP_X_API_KEY=key)
    assert small.status_code == 200
    assert small.json()["units"] == 1
    big = client.post("/api/demo/generate", {"prompt": "x" * 2500}, format="json", HTTP_X_API_KEY=key)
    assert big.status_code == 200
    assert big.json()["units"] == 2
    assert Decimal(big.json()["cost"]) > Decimal(small.json()["cost"])
    assert big["RateLimit"].count("r=") == 5  # generate: 2 windows, global: 3


def test_free_key_exhausts_its_daily_budget_while_the_rate_limit_has_room(client, seeded):
    """Priced by prompt size and reconciled: big prompts spend the free $0.50 a day in two requests."""
    key = demo_key("free")
    prompt = {"prompt": "word " * 800}  # 4,000 characters
    first = client.post("/api/demo/generate", prompt, format="json", HTTP_X_API_KEY=key)
    assert first.status_code == 200
    assert Decimal(first.json()["cost"]) < Decimal("0.25")  # actual < estimate (prompt + 1,000 chars)
    assert client.post("/api/demo/generate", prompt, format="json", HTTP_X_API_KEY=key).status_code == 200
    refused = client.post("/api/demo/generate", prompt, format="json", HTTP_X_API_KEY=key)
    assert refused.status_code == 429
    body = refused.json()
    assert body["reason"] == "budget_exceeded"
    assert body["upgrade"]["plan"] == "pro"
    assert "RateLimit" not in refused  # the rate windows, which still have room, did not refuse it
    assert "generate-1m" not in body["violated_policies"]


def test_generate_rejects_bad_input_with_400(client, seeded):
    key = demo_key("enterprise")
    assert client.post("/api/demo/generate", {}, format="json", HTTP_X_API_KEY=key).status_code == 400
    broken = client.post("/api/demo/generate", "{not json", content_type="application/json", HTTP_X_API_KEY=key)
    assert broken.status_code == 400


@pytest.mark.parametrize("prompt", [12345678901234567890, 3.5, ["a"], {"a": 1}, None, True])
def test_generate_refuses_a_prompt_that_is_not_text_before_charging_anything(client, seeded, prompt):
    """A JSON number is not weighed as an empty prompt (which costs a third of the same text): the input is
    validated before the throttle weighs and prices it, so a 400 names the field and nothing is spent."""
    key = demo_key("free")
    refused = client.post("/api/demo/generate", {"prompt": prompt}, format="json", HTTP_X_API_KEY=key)
    assert refused.status_code == 400
    assert "prompt" in refused.json()
    assert "RateLimit" not in refused
    usage = client.get("/api/v1/usage/", HTTP_X_API_KEY=key).json()
    assert Decimal(str(usage["totals"]["cost"])) == 0


def test_healthz_reports_redis(client, admin_client):
    body = admin_client.get("/healthz").json()
    assert body["redis"]["reachable"] is True
    assert body["status"] == "ok"


def test_healthz_reports_redis_down(admin_client, redis_server):
    redis_server.stop()
    try:
        response = admin_client.get("/healthz")
    finally:
        redis_server.start()
    assert response.status_code == 503
    assert json.loads(response.content)["redis"]["reachable"] is False


def test_openapi_schema(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/demo/ping" in response.content


def test_the_seeded_plans_are_those_of_demo_plans_yaml(seeded):
    """seed_demo creates the plans through plans as code: applying demo/plans.yaml afterwards changes nothing."""
    out = io.StringIO()
    call_command("quota_plans", "apply", str(PLANS_FILE), stdout=out)
    assert out.getvalue() == "No changes.\n"


def test_seeding_again_leaves_an_edited_demo_plan_as_it_is(seeded):
    """A demo plan edited in the admin keeps its edits when seed_demo runs again (as at each `make run`)."""
    EndpointLimit.objects.filter(plan__slug="free", name="search").update(rates="20/min")
    call_command("seed_demo", stdout=io.StringIO())
    assert EndpointLimit.objects.get(plan__slug="free", name="search").rates == "20/min"
