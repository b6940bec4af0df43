"""GET /api/v1/notifications: a subscription reads its own endpoints and deliveries with its key; others get
problem+json 401/403; no secret ever appears."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from notifications.dispatch import dispatch_due
from tests.factories import UserFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]
URL = "/api/v1/notifications"


def test_a_subscription_reads_its_endpoints_and_deliveries(metered, receiver, internal_allowed):
    api = APIClient()
    for _ in range(4):
        api.get("/t/priced", HTTP_X_API_KEY=metered.key)
    dispatch_due()
    response = api.get(URL, HTTP_X_API_KEY=metered.key)
    assert response.status_code == 200
    body = response.json()
    (endpoint,) = body["endpoints"]
    assert (endpoint["url"], endpoint["is_active"]) == (receiver.url, True)
    assert {(d["to"], d["status"], d["event"]["type"]) for d in body["deliveries"]} == {
        (receiver.url, "succeeded", "budget.threshold_crossed"),
        ("billing@acme.example", "succeeded", "budget.threshold_crossed"),
    }
    assert metered.secret not in response.content.decode()
    assert "secret" not in response.content.decode()


def test_another_subscription_sees_only_its_own(metered, free_key_client):
    body = free_key_client.get(URL).json()
    assert body == {"endpoints": [], "deliveries": []}


@pytest.fixture
def free_key_client(db):
    from tests.factories import PlanFactory

    client = APIClient()
    client.credentials(HTTP_X_API_KEY=issue_key(plan=PlanFactory(slug="other")))
    return client


def test_anonymous_and_users_without_a_subscription_get_problems(db):
    anonymous = APIClient().get(URL)
    assert anonymous.status_code == 401
    assert anonymous["Content-Type"] == "application/problem+json"
    user = APIClient()
    user.force_authenticate(UserFactory(username="nosub"))
    refused = user.get(URL)
    assert refused.status_code == 403
    assert refused["Content-Type"] == "application/problem+json"
    assert "subscription" in refused.json()["detail"]
    bad = APIClient().get(URL, HTTP_X_API_KEY="qk_not-a-key")
    assert bad.status_code == 401


def test_the_usage_page_lists_the_subscriptions_webhooks_and_deliveries(metered, receiver, internal_allowed):
    """Signed in with its key, a subscription sees its endpoint and each delivery's status on its usage page."""
    from django.test import Client

    api = APIClient()
    for _ in range(4):
        api.get("/t/priced", HTTP_X_API_KEY=metered.key)
    dispatch_due()
    browser = Client()
    signed_in = browser.post("/usage/", {"api_key": metered.key})
    assert signed_in.status_code == 302
    page = browser.get(signed_in["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="notifications"' in html
    assert receiver.url in html
    assert "billing@acme.example" in html
    assert html.count("succeeded") == 2
    assert metered.secret not in html


def test_the_body_matches_the_openapi_schema(metered, receiver, internal_allowed):
    """The served schema describes the body exactly (objects closed), as the usage API's bodies are checked."""
    from tests.usage.test_schema_bodies import assert_valid, validator

    api = APIClient()
    for _ in range(4):
        api.get("/t/priced", HTTP_X_API_KEY=metered.key)
    dispatch_due()
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    body = api.get(URL, HTTP_X_API_KEY=metered.key).json()
    assert body["deliveries"]
    assert_valid(validator(schema, URL), body)


def test_a_customer_sees_the_kind_of_a_failure_and_staff_the_detail(metered, receiver, set_quotas):
    """An endpoint whose host resolves to loopback is refused. Its customer reads `refused_address`, never the
    address its host resolved to (which would let a customer probe the platform's resolver); staff read the
    detail in the admin."""
    from django.contrib.auth.models import Permission
    from django.test import Client

    from notifications.models import Delivery

    set_quotas(NOTIFICATIONS={"ALLOW_HTTP": True})
    port = receiver.url.split(":")[2].split("/")[0]
    metered.endpoint.url = f"http://localhost:{port}/hooks/quota"
    metered.endpoint.save()
    api = APIClient()
    for _ in range(4):
        api.get("/t/priced", HTTP_X_API_KEY=metered.key)
    dispatch_due()
    response = api.get(URL, HTTP_X_API_KEY=metered.key)
    (hook,) = [d for d in response.json()["deliveries"] if d["to"].startswith("http")]
    assert (hook["status"], hook["error"], hook["next_attempt_at"]) == ("failed", "refused_address", None)
    assert "127.0.0.1" not in response.content.decode()
    assert "internal" not in response.content.decode()
    page = Client().post("/usage/", {"api_key": metered.key}, follow=True)
    assert "refused_address" in page.content.decode()
    assert "127.0.0.1" not in page.content.decode()
    staff = UserFactory(username="ops", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename="view_delivery"))
    admin = Client()
    admin.force_login(staff)
    delivery = Delivery.objects.get(endpoint__isnull=False)
    detail = admin.get(f"/admin/quota_notifications/delivery/{delivery.pk}/change/").content.decode()
    assert "localhost resolves to an internal address (127.0.0.1)" in detail


def test_a_delivered_delivery_has_no_next_attempt(metered, receiver, internal_allowed):
    """Once delivered, `next_attempt_at` is null in the API and empty in the admin (it showed the claim's lease,
    a moment in the future when nothing would happen)."""
    import re

    from django.contrib.auth.models import Permission
    from django.test import Client

    from notifications.models import Delivery

    api = APIClient()
    for _ in range(4):
        api.get("/t/priced", HTTP_X_API_KEY=metered.key)
    assert dispatch_due().sent == 2
    deliveries = api.get(URL, HTTP_X_API_KEY=metered.key).json()["deliveries"]
    assert [(d["status"], d["next_attempt_at"], d["error"]) for d in deliveries] == [("succeeded", None, None)] * 2
    staff = UserFactory(username="ops", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename="view_delivery"))
    admin = Client()
    admin.force_login(staff)
    delivery = Delivery.objects.get(endpoint__isnull=False)
    page = admin.get(f"/admin/quota_notifications/delivery/{delivery.pk}/change/").content.decode()
    field = re.search(r'field-next_attempt_at.*?<div class="readonly">(.*?)</div>', page, re.S)
    assert field is not None
    assert field.group(1) == "-"
