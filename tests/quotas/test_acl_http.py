"""Allow and deny lists as clients see them: 403 problem bodies, skipped limits, usage counted."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from plans.models import ACLEntry, APIKey
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory
from tests.usage_counters import usage_totals

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="2/min", algorithm="fixed_window")
    return plan


@pytest.fixture
def client():
    return APIClient()


def deny(**kwargs):
    return ACLEntry.objects.create(action="deny", reason="test", **kwargs)


def test_denied_ip_gets_403_problem_without_retry_after(client, free, redis_client):
    deny(cidr="203.0.113.0/24")
    response = client.get("/api/demo/ping", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert "Retry-After" not in response
    assert json.loads(response.content)["reason"] == "acl_denied"
    assert client.get("/api/demo/ping", REMOTE_ADDR="198.51.100.1").status_code == 200
    assert usage_totals(redis_client)["da"] == 1


def test_expiring_deny_says_when_to_retry(client, free):
    deny(cidr="203.0.113.9", expires_at=timezone.now() + timedelta(minutes=10))
    response = client.get("/api/demo/ping", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 403
    assert 590 <= int(response["Retry-After"]) <= 600


def test_deny_on_one_key_spares_the_subscriptions_other_keys(client, free):
    sub = SubscriptionFactory(plan=free)
    blocked, raw_blocked = APIKey.issue(sub)
    _, raw_other = APIKey.issue(sub)
    deny(api_key=blocked)
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=raw_blocked).status_code == 403
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=raw_other).status_code == 200


def test_deny_on_a_subscription_covers_all_its_keys(client, free):
    sub = SubscriptionFactory(plan=free)
    keys = [APIKey.issue(sub)[1] for _ in range(2)]
    deny(subscription=sub)
    assert {client.get("/api/demo/ping", HTTP_X_API_KEY=k).status_code for k in keys} == {403}


def test_scoped_deny_applies_only_to_that_scope(client, free):
    deny(cidr="203.0.113.9", scope="search")
    assert client.get("/api/demo/search?q=x", REMOTE_ADDR="203.0.113.9").status_code == 403
    assert client.get("/api/demo/ping", REMOTE_ADDR="203.0.113.9").status_code == 200


def test_allow_entry_skips_limits_but_is_counted(client, free, redis_client):
    ACLEntry.objects.create(action="allow", cidr="198.51.100.0/24", reason="monitoring")
    codes = {client.get("/api/demo/ping", REMOTE_ADDR="198.51.100.7").status_code for _ in range(10)}
    assert codes == {200}
    assert usage_totals(redis_client)["a"] == 10


def test_an_allowed_request_is_settled_with_the_cost_its_view_reports_or_released_when_it_fails(
    client, free, redis_client
):
    """An allow entry's decision has no window (nothing to settle on a plain answer), yet the actual cost its view
    reports replaces the estimate in its usage, and a failed view releases the estimate."""
    ACLEntry.objects.create(action="allow", cidr="198.51.100.0/24", reason="monitoring")
    assert client.get("/t/priced?est=1&actual=3", REMOTE_ADDR="198.51.100.7").status_code == 200
    assert usage_totals(redis_client)["c"] == 3_000_000
    with pytest.raises(RuntimeError):
        client.get("/t/priced?est=1&fail=1", REMOTE_ADDR="198.51.100.7")
    assert usage_totals(redis_client)["c"] == 3_000_000


def test_spoofed_forwarded_for_does_not_escape_an_ip_deny(client, free):
    deny(cidr="203.0.113.9")
    response = client.get("/api/demo/ping", REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="8.8.8.8")
    assert response.status_code == 403


def test_deny_entries_lapse_on_their_own(client, free, quota_clock):
    """An expired entry stops matching without any reload."""
    expires_at = timezone.now() + timedelta(seconds=60)
    deny(cidr="203.0.113.9", expires_at=expires_at)
    assert client.get("/api/demo/ping", REMOTE_ADDR="203.0.113.9").status_code == 403
    quota_clock.set(expires_at.timestamp() + 1)  # the engine's clock judges a request's access-list entries
    assert client.get("/api/demo/ping", REMOTE_ADDR="203.0.113.9").status_code == 200


def test_thousands_of_entries_still_decide(client, free):
    ACLEntry.objects.bulk_create(
        ACLEntry(action="deny", cidr=f"10.{i // 256}.{i % 256}.0/24", reason="bulk") for i in range(3000)
    )
    from quotas.engine import default_engine

    default_engine.runtime().rules.mark_stale()  # bulk_create sends no signals
    assert client.get("/api/demo/ping", REMOTE_ADDR="10.11.12.13").status_code == 403
    assert client.get("/api/demo/ping", REMOTE_ADDR="11.0.0.1").status_code == 200
