"""The notifications admin as staff with given permissions: endpoints (an internal URL refused, the secret shown
once and stored encrypted), deliveries (read only, "send again" only with the change permission)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from notifications.events import EVENT_TYPES, EVENTS_DOCS_URL
from notifications.models import Contact, Delivery, Endpoint
from notifications.secrets import decrypt
from tests.factories import SubscriptionFactory, UserFactory

pytestmark = pytest.mark.django_db
ENDPOINTS = "/admin/quota_notifications/endpoint/"
DELIVERIES = "/admin/quota_notifications/delivery/"


def staff_with(*codenames: str) -> Client:
    user = UserFactory(username="ops", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_an_endpoint_shows_its_secret_once_and_keeps_it_encrypted(set_quotas):
    """Adding an endpoint answers a page with its secret (whsec_...); the row holds it encrypted only."""
    client = staff_with("add_endpoint", "view_endpoint", "change_endpoint")
    sub = SubscriptionFactory()
    # A public address, written as one: saving resolves the host, and this needs no DNS.
    page = client.post(ENDPOINTS + "add/", {"subscription": sub.pk, "url": "https://1.1.1.1/q",
                                            "events": ["budget.threshold_crossed"], "is_active": "on"})  # fmt: skip
    assert page.status_code == 200
    secret = page.context["secret"]
    assert secret.startswith("whsec_")
    endpoint = Endpoint.objects.get()
    assert secret not in endpoint.secret_encrypted
    assert decrypt(endpoint.secret_encrypted) == secret
    assert secret not in client.get(ENDPOINTS + f"{endpoint.pk}/change/").content.decode()  # never again


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.example.com/q", "only https:// URLs"),
        ("https://127.0.0.1/q", "internal address"),
        ("https://localhost:8443/q", "internal address"),
    ],
)
def test_an_internal_or_plain_http_url_is_a_validation_message(url, why):
    client = staff_with("add_endpoint", "view_endpoint")
    page = client.post(ENDPOINTS + "add/", {"subscription": SubscriptionFactory().pk, "url": url})
    assert page.status_code == 200
    assert why in page.context["adminform"].form.errors["url"][0]
    assert not Endpoint.objects.exists()


def test_an_unknown_event_type_is_a_validation_message():
    client = staff_with("add_endpoint", "view_endpoint")
    page = client.post(ENDPOINTS + "add/", {"subscription": SubscriptionFactory().pk,
                                            "url": "https://1.1.1.1/q", "events": ["budget.spent"]})  # fmt: skip
    assert "budget.spent is not one of the available choices" in page.context["adminform"].form.errors["events"][0]


@pytest.fixture
def failed_delivery(metered):
    from django.utils import timezone

    from notifications.record import record_event

    event = record_event("budget.threshold_crossed", metered.subscription, "k", {"threshold": 80, "budget": "b",
                         "subscription": {"name": "ACME"}, "spent": "1", "amount": "2", "currency": "USD",
                         "period_start": "x"}, timezone.now())  # fmt: skip
    Delivery.objects.filter(event=event).update(status="failed", attempts=20, error="HTTP 500")
    return Delivery.objects.get(endpoint__isnull=False)


def test_send_again_needs_the_change_permission(failed_delivery):
    """A viewer sees the deliveries but no action; one who may change them queues a failed one again."""
    viewer = staff_with("view_delivery")
    listing = viewer.get(DELIVERIES)
    assert listing.status_code == 200
    assert "send_again" not in listing.content.decode()
    viewer.post(DELIVERIES, {"action": "send_again", "_selected_action": [failed_delivery.pk]})  # not offered
    failed_delivery.refresh_from_db()
    assert failed_delivery.status == "failed"
    changer = staff_with("view_delivery", "change_delivery")
    changer.post(DELIVERIES, {"action": "send_again", "_selected_action": [failed_delivery.pk]})
    failed_delivery.refresh_from_db()
    assert failed_delivery.status == "pending"
    assert changer.get(DELIVERIES + "add/").status_code == 403  # deliveries come from events only


def test_the_endpoint_form_offers_event_checkboxes_a_docs_link_and_a_url_label():
    """The admin's add form reads like the customer's page: one checkbox per event type (not a JSON textarea), a
    help link that works from an installed package, and the label "URL"."""
    page = staff_with("add_endpoint", "view_endpoint").get(ENDPOINTS + "add/").content.decode()
    for event_type in EVENT_TYPES:
        assert f'type="checkbox" name="events" value="{event_type}"' in page
    assert 'name="events" cols=' not in page  # no JSON textarea
    assert f'href="{EVENTS_DOCS_URL}"' in page
    assert "docs/notifications.md" not in page
    assert ">URL:</label>" in page


def test_the_subscription_page_names_its_own_budgets_inline():
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin)
    page = client.get(f"/admin/quota_plans/subscription/{SubscriptionFactory().pk}/change/").content.decode()
    assert "Own budgets (each replaces the plan&#x27;s budget of its period)" in page
    assert ")s<" not in page


def test_an_endpoint_for_all_events_is_saved():
    """No box ticked saves an endpoint for all events."""
    client = staff_with("add_endpoint", "view_endpoint")
    page = client.post(ENDPOINTS + "add/", {"subscription": SubscriptionFactory().pk, "url": "https://1.1.1.1/q",
                                            "is_active": "on"})  # fmt: skip
    assert page.status_code == 200, page.context["adminform"].form.errors
    assert page.context["secret"].startswith("whsec_")
    endpoint = Endpoint.objects.get()
    assert endpoint.events == []
    assert endpoint.wants("client.banned")
    assert endpoint.wants("budget.threshold_crossed")


def test_a_contact_for_all_events_is_saved():
    client = staff_with("add_contact", "view_contact")
    page = client.post("/admin/quota_notifications/contact/add/",
                       {"subscription": SubscriptionFactory().pk, "email": "ops@acme.example",
                        "is_active": "on"})  # fmt: skip
    assert page.status_code == 302, page.context["adminform"].form.errors
    assert Contact.objects.get().events == []


@pytest.mark.parametrize(
    "url",
    ["https://[64:ff9b::a9fe:a9fe]/q", "https://[64:ff9b::a00:1]/q", "https://[::127.0.0.1]/q",
     "https://[2002:7f00:1::]/q", "https://[fec0::1]/q"],
)  # fmt: skip
def test_an_internal_ipv4_address_in_an_ipv6_form_is_refused(url):
    """NAT64, IPv4-compatible and 6to4 forms of internal IPv4 addresses, and site-local: a validation message."""
    client = staff_with("add_endpoint", "view_endpoint")
    page = client.post(ENDPOINTS + "add/", {"subscription": SubscriptionFactory().pk, "url": url})
    assert page.status_code == 200
    assert "internal address" in page.context["adminform"].form.errors["url"][0]
    assert not Endpoint.objects.exists()


def test_staff_are_held_to_the_fan_out_limits(set_quotas):
    """With MAX_ENDPOINTS and MAX_CONTACTS 1, a second endpoint or contact of one subscription is a validation
    message naming the limit, whether added or moved to it; editing the one it has stays allowed."""
    set_quotas(NOTIFICATIONS={"MAX_ENDPOINTS": 1, "MAX_CONTACTS": 1})
    client = staff_with("add_endpoint", "change_endpoint", "view_endpoint", "add_contact", "view_contact")
    sub, other = SubscriptionFactory(), SubscriptionFactory()
    endpoint = {"subscription": sub.pk, "url": "https://1.1.1.1/q", "is_active": "on"}
    assert client.post(ENDPOINTS + "add/", endpoint).status_code == 200  # its secret, shown once
    second = client.post(ENDPOINTS + "add/", endpoint)
    (why,) = second.context["adminform"].form.non_field_errors()
    assert "1 webhook endpoints, the most allowed (QUOTAS['NOTIFICATIONS']['MAX_ENDPOINTS'])" in why
    assert client.post(ENDPOINTS + "add/", {**endpoint, "subscription": other.pk}).status_code == 200
    moved = client.post(ENDPOINTS + f"{Endpoint.objects.get(subscription=other).pk}/change/", endpoint)
    assert "the most allowed" in moved.context["adminform"].form.non_field_errors()[0]
    kept = Endpoint.objects.get(subscription=sub)
    edited = client.post(ENDPOINTS + f"{kept.pk}/change/", {**endpoint, "url": "https://1.0.0.1/q"})
    assert edited.status_code == 302
    assert Endpoint.objects.filter(subscription=sub).count() == 1
    contact = {"subscription": sub.pk, "email": "ops@acme.example", "is_active": "on"}
    assert client.post("/admin/quota_notifications/contact/add/", contact).status_code == 302
    refused = client.post("/admin/quota_notifications/contact/add/", {**contact, "email": "b@acme.example"})
    assert "QUOTAS['NOTIFICATIONS']['MAX_CONTACTS']" in refused.context["adminform"].form.non_field_errors()[0]
    assert Contact.objects.count() == 1
