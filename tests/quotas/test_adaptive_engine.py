"""Adaptive multipliers as the client sees them: reduced quotas, 503 for reduction-only refusals."""

from __future__ import annotations

import json
import time

import pytest
from rest_framework.test import APIClient

from quotas.engine import default_engine
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="10/min", algorithm="fixed_window")
    return plan


def publish(redis_client, multipliers: dict) -> None:
    """As the adaptive controller does; then let this process read it at once."""
    redis_client.set("quota:v1:adaptive:multipliers", json.dumps({**multipliers, "updated_at": time.time()}))
    runtime = default_engine.runtime()
    runtime.rules.current()
    runtime.multipliers.refresh(runtime.store.multipliers)


def test_reduced_quota_shows_in_ratelimit_while_the_policy_stays_stable(free, redis_client):
    """Under a multiplier the policy keeps its full quota; what remains (r) counts from the reduced one."""
    publish(redis_client, {str(free.pk): 0.5})
    response = APIClient().get("/api/demo/ping", HTTP_X_API_KEY=issue_key(plan=free))
    assert response.status_code == 200
    assert response["X-RateLimit-Limit"] == "5"
    assert response["RateLimit-Policy"] == '"global";q=10;w=60'
    assert response["RateLimit"].startswith('"global";r=4;t=')


def test_refusal_caused_only_by_the_reduction_is_503(free, redis_client):
    """Over the reduced quota but within the full one: 503 temporary-reduced-capacity with Retry-After."""
    publish(redis_client, {str(free.pk): 0.5})
    client = APIClient()
    key = issue_key(plan=free)
    assert [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(5)] == [200] * 5
    response = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert int(response["Retry-After"]) >= 1
    body = json.loads(response.content)
    assert body["type"].endswith("#temporary-reduced-capacity")
    assert body["limit"]["quota"] == 5
    assert body["limit"]["full_quota"] == 10


def test_ordinary_over_limit_stays_429(free, redis_client):
    """A client past its full quota gets 429 even while limits are reduced."""
    client = APIClient()
    key = issue_key(plan=free)
    for _ in range(10):
        client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    publish(redis_client, {str(free.pk): 0.5})
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 429


def test_a_429_under_a_reduction_states_the_quota_in_force_and_why(free, redis_client):
    """The refusal names the quota that applies now (5), that it is reduced under load, and from what (10):
    never "allows 10 requests per minute" to a client refused at its sixth."""
    client = APIClient()
    key = issue_key(plan=free)
    for _ in range(10):
        client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    publish(redis_client, {str(free.pk): 0.5})
    response = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert response.status_code == 429
    body = json.loads(response.content)
    assert body["detail"].startswith(
        "The limit 'global' allows 5 requests per minute while the service is under load (reduced from 10, "
        "a multiplier of 0.50); retry in "
    )
    assert body["limit"]["quota"] == 5
    assert body["limit"]["full_quota"] == 10
    assert body["limit"]["reduced"] is True
    assert body["multiplier"] == 0.5
    assert response["X-RateLimit-Limit"] == "5"


def test_a_429_at_full_capacity_says_nothing_of_a_reduction(free):
    client = APIClient()
    key = issue_key(plan=free)
    for _ in range(10):
        client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    body = json.loads(client.get("/api/demo/ping", HTTP_X_API_KEY=key).content)
    assert body["detail"].startswith("The limit 'global' allows 10 requests per minute; retry in ")
    assert "full_quota" not in body["limit"]
    assert "multiplier" not in body


def test_other_plans_are_not_touched(free, redis_client):
    pro = PlanFactory(slug="pro")
    EndpointLimitFactory(plan=pro, name="global", rates="10/min")
    publish(redis_client, {str(free.pk): 0.3})
    response = APIClient().get("/api/demo/ping", HTTP_X_API_KEY=issue_key(plan=pro))
    assert response["X-RateLimit-Limit"] == "10"


@pytest.mark.slow
def test_published_multipliers_reach_the_process_within_two_seconds(free, redis_client):
    client = APIClient()
    key = issue_key(plan=free)
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key)["X-RateLimit-Limit"] == "10"
    redis_client.set("quota:v1:adaptive:multipliers", json.dumps({str(free.pk): 0.5}))
    halved = wait_until(lambda: client.get("/api/demo/ping", HTTP_X_API_KEY=key)["X-RateLimit-Limit"] == "5", 2.0, 0.1)
    assert halved


def test_junk_multipliers_are_ignored(free, redis_client):
    redis_client.set("quota:v1:adaptive:multipliers", b"{not json")
    runtime = default_engine.runtime()
    runtime.multipliers.refresh(runtime.store.multipliers)
    assert runtime.multipliers.by_plan == {}
    publish(redis_client, {str(free.pk): "x", "7": -1, "8": 0.5})
    assert runtime.multipliers.by_plan == {8: 0.5}


def test_quota_status_shows_the_quota_in_force_and_the_multiplier(free, redis_client):
    """At 0.2, a 10/min limit admits 2: quota_status says 2 of 10 with nothing remaining after two requests (not
    quota 10, remaining 8), and names the multiplier; the usage API's standing says the same."""
    from io import StringIO

    from django.core.management import call_command

    publish(redis_client, {str(free.pk): 0.2})
    key = issue_key(plan=free)
    api = APIClient()
    assert [api.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(3)] == [200, 200, 503]
    tag = f"s.{free.subscriptions.get().pk}"
    out = StringIO()
    call_command("quota_status", tag, "--json", stdout=out)
    (limit,) = json.loads(out.getvalue())["limits"]
    assert (limit["quota"], limit["plan_quota"], limit["multiplier"], limit["remaining"]) == (2, 10, 0.2, 0)
    assert limit["used"] == 2
    out = StringIO()
    call_command("quota_status", tag, stdout=out)
    assert "adaptive multiplier 0.20 cuts" in out.getvalue()
    assert "2 of 10" in out.getvalue()
    (current,) = api.get("/api/v1/usage/current", HTTP_X_API_KEY=key).json()["limits"]
    assert (current["quota"], current["plan_quota"], current["remaining"]) == (2, 10, 0)
