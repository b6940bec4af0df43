"""The customer's page without a browser: what each role sees, the forms' answers, and the server's own checks
(a form hidden from a member is refused all the same)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from console.models import AuditEntry
from notifications.dispatch import dispatch_due
from notifications.models import Contact, Delivery, Endpoint, Event
from notifications.secrets import decrypt, encrypt, new_secret
from plans.models import APIKey, CostBudget, SpendCap
from quotas.internal_api import hash_api_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def budgeted(team):
    CostBudget.objects.create(plan=team.subscription.plan, period="day", amount=Decimal("2.00"), currency="EUR")
    return team


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_url(team, tail: str = "") -> str:
    return f"/usage/account/{team.subscription.pk}/{tail}"


def test_signed_out_visitors_are_sent_to_sign_in(budgeted):
    response = Client().get(page_url(budgeted))
    assert response.status_code == 302
    assert response["Location"].startswith("/usage/account/sign-in/")


def test_an_owner_sees_the_forms_and_a_member_only_reads(budgeted):
    owner = browser(budgeted.owner).get(page_url(budgeted)).content.decode()
    assert "Set cap" in owner
    assert "Save thresholds" in owner
    assert "Audit log" in owner
    assert "2.00 EUR" in owner
    member = browser(budgeted.member).get(page_url(budgeted)).content.decode()
    assert "2.00 EUR" in member
    assert "Set cap" not in member
    assert "Save thresholds" not in member
    assert "Audit log" not in member


def test_the_index_lists_the_users_subscriptions(budgeted):
    body = browser(budgeted.member).get("/usage/account/").content.decode()
    assert "Acme" in body
    assert "member" in body


def test_an_owner_sets_and_removes_a_cap(budgeted):
    client = browser(budgeted.owner)
    response = client.post(page_url(budgeted, "cap"), {"period": "day", "amount": "1.5", "action": "set"})
    assert response.status_code == 302
    assert response["Location"].endswith("#caps")
    assert SpendCap.objects.get().amount == Decimal("1.5")
    page = client.get(response["Location"]).content.decode()
    assert "The day cap is now 1.50 EUR." in page
    asked = client.post(page_url(budgeted, "cap"), {"period": "day", "action": "remove"})
    assert (asked.status_code, SpendCap.objects.count()) == (200, 1)  # the server's confirmation step: no script
    assert "Remove the day cap?" in asked.content.decode()
    assert '<input type="hidden" name="confirmed" value="yes">' in asked.content.decode()
    client.post(page_url(budgeted, "cap"), {"period": "day", "action": "remove", "confirmed": "yes"})
    assert not SpendCap.objects.exists()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["cap.set", "cap.remove"]


def test_a_bad_form_answers_400_with_its_error(budgeted):
    client = browser(budgeted.owner)
    above = client.post(page_url(budgeted, "cap"), {"period": "day", "amount": "3", "action": "set"})
    assert above.status_code == 400
    assert "At most the day budget, 2.00 EUR" in above.content.decode()
    words = client.post(page_url(budgeted, "thresholds"), {"percents": "half, most"})
    assert words.status_code == 400
    assert "Whole percentages" in words.content.decode()
    assert not SpendCap.objects.exists()


def test_members_are_refused_and_strangers_find_nothing(budgeted, other_team):
    member = browser(budgeted.member)
    assert member.post(page_url(budgeted, "cap"), {"period": "day", "amount": "1", "action": "set"}).status_code == 403
    assert member.post(page_url(budgeted, "thresholds"), {"percents": "50"}).status_code == 403
    stranger = browser(other_team.owner)
    assert stranger.get(page_url(budgeted)).status_code == 404
    assert stranger.post(page_url(budgeted, "thresholds"), {"percents": "50"}).status_code == 404
    assert not AuditEntry.objects.exists()


def test_a_form_without_the_csrf_token_is_refused(budgeted):
    client = Client(enforce_csrf_checks=True)
    client.force_login(budgeted.owner)
    assert client.post(page_url(budgeted, "thresholds"), {"percents": "50"}).status_code == 403


# Keys, webhooks and contacts: the lists every role reads, and the owners' forms.


@dataclass
class Stock:
    """A subscription's key, endpoint (with a failed delivery) and contact, by id, for the routes' URLs."""

    key: int
    endpoint: int
    delivery: int
    contact: int


def stock_of(team) -> Stock:
    key = APIKey.objects.get(subscription=team.subscription)
    endpoint = Endpoint.objects.create(subscription=team.subscription, url="https://hooks.example.com/quota",
                                       events=["client.banned"], secret_encrypted=encrypt(new_secret()))  # fmt: skip
    event = Event.objects.create(type="client.banned", subscription=team.subscription, dedupe_key=f"t:{endpoint.pk}",
                                 data={}, created_at=timezone.now())  # fmt: skip
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, body="{}", status=Delivery.Status.FAILED,
                                       attempts=3, response_status=500, response_body="receiver failed")  # fmt: skip
    contact = Contact.objects.create(subscription=team.subscription, email="ops@acme.test", confirmed_at=None)
    return Stock(key.pk, endpoint.pk, delivery.pk, contact.pk)


@pytest.fixture
def stock(team) -> Stock:
    return stock_of(team)


def route(team, stock: Stock, tail: str) -> str:
    return page_url(team, tail.format(**vars(stock)))


def test_every_role_reads_the_lists_and_only_owners_get_forms(team, stock):
    """Members see the keys, endpoints, deliveries and contacts, without one form to change them."""
    owner = browser(team.owner).get(page_url(team)).content.decode()
    member = browser(team.member).get(page_url(team)).content.decode()
    key = APIKey.objects.get(pk=stock.key)
    for body in (owner, member):
        assert f"{key.prefix}…" in body
        assert "https://hooks.example.com/quota" in body
        assert "500 receiver failed" in body  # the delivery's answer
        assert "ops@acme.test" in body
        assert "not yet" in body
    for form in ("Create key", "Roll", "Revoke", "Register endpoint", "Send a test event", "Roll secret",
                 "Disable", "Send again", "Add contact", "Delete"):  # fmt: skip
        assert form in owner
        assert form not in member


def test_an_owner_creates_a_key_shown_once_in_the_answer(team):
    """201 with the raw key (no-store); the database keeps its hash; the next page shows its prefix only."""
    client = browser(team.owner)
    later = (timezone.now() + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(page_url(team, "keys"), {"name": "ci", "expires_at": later})
    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    raw = re.search(r'<code id="secret">(qk_[^<]+)</code>', response.content.decode()).group(1)
    key = APIKey.objects.get(key_hash=hash_api_key(raw))
    assert (key.name, key.expires_at.strftime("%Y-%m-%dT%H:%M")) == ("ci", later)
    page = client.get(page_url(team)).content.decode()
    assert raw not in page
    assert f"{key.prefix}…" in page
    assert AuditEntry.objects.get().action == "key.create"


def test_an_owner_rolls_a_key_then_revokes_the_old_one(team, stock):
    client = browser(team.owner)
    rolled = client.post(route(team, stock, "keys/{key}/roll"), {"overlap_seconds": "3600"})
    assert rolled.status_code == 201
    raw = re.search(r'<code id="secret">(qk_[^<]+)</code>', rolled.content.decode()).group(1)
    old = APIKey.objects.get(pk=stock.key)
    assert old.rolled_to == APIKey.objects.get(key_hash=hash_api_key(raw))
    assert timedelta(minutes=59) < old.expires_at - timezone.now() <= timedelta(hours=1)
    asked = client.post(route(team, stock, "keys/{key}/revoke"))  # not confirmed yet: asked, nothing revoked
    assert asked.status_code == 200
    assert f"Revoke key {old.prefix}… (" in asked.content.decode()
    assert APIKey.objects.get(pk=stock.key).revoked_at is None
    revoked = client.post(route(team, stock, "keys/{key}/revoke"), {"confirmed": "yes"})
    assert revoked.status_code == 302
    assert revoked["Location"].endswith("#keys")
    assert APIKey.objects.get(pk=stock.key).revoked_at is not None
    assert "is revoked" in client.get(revoked["Location"]).content.decode()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["key.roll", "key.revoke"]


def test_an_owner_gives_a_key_its_own_limits(team, stock):
    client = browser(team.owner)
    CostBudget.objects.create(plan=team.subscription.plan, period="day", amount=Decimal("2.00"), currency="EUR")
    done = client.post(route(team, stock, "keys/{key}/limits"),
                       {"own_rates": "5/min", "cap_period": "day", "cap_amount": "0.5"})  # fmt: skip
    assert done.status_code == 302
    key = APIKey.objects.get(pk=stock.key)
    assert (key.own_rates, key.cap_period, key.cap_amount) == ("5/min", "day", Decimal("0.5"))
    assert "5/min, at most 0.50 EUR a day" in client.get(done["Location"]).content.decode()
    above = client.post(route(team, stock, "keys/{key}/limits"),
                        {"own_rates": "", "cap_period": "day", "cap_amount": "3"})  # fmt: skip
    assert above.status_code == 400
    assert "At most the day budget, 2.00 EUR" in above.content.decode()
    assert APIKey.objects.get(pk=stock.key).cap_amount == Decimal("0.5")
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["key.limits"]


def test_an_owner_runs_an_endpoint_from_the_page(team, receiver, internal_allowed):
    """Register (the secret once), test (queued, then the receiver's 200 on the page once the dispatcher sent
    it), roll the secret, resend the test,
    disable and delete: each saved, each audited."""
    client = browser(team.owner)
    wanted = ["client.banned", "client.ban_ended"]
    made = client.post(page_url(team, "webhooks"), {"url": receiver.url, "events": wanted, "description": "ops"})
    assert made.status_code == 201
    secret = re.search(r'<code id="secret">(whsec_[^<]+)</code>', made.content.decode()).group(1)
    endpoint = Endpoint.objects.get(subscription=team.subscription)
    assert (endpoint.url, endpoint.events, endpoint.description) == (receiver.url, wanted, "ops")
    assert decrypt(endpoint.secret_encrypted) == secret
    tested = client.post(page_url(team, f"webhooks/{endpoint.pk}/test"))
    assert tested.status_code == 302
    assert tested["Location"].endswith("#webhooks")
    assert receiver.requests == []  # queued: the request sent nothing
    queued = client.get(tested["Location"]).content.decode()
    assert "Test event queued for" in queued
    assert '<td data-label="Status" class="status">pending (queued)</td>' in queued
    assert dispatch_due().sent == 1
    assert len(receiver.requests) == 1
    sent = client.get(tested["Location"]).content.decode()
    assert '<td data-label="Status" class="status">succeeded</td>' in sent
    assert "200 ok" in sent
    rolled = client.post(page_url(team, f"webhooks/{endpoint.pk}/roll-secret"), {"overlap_seconds": "86400"})
    assert rolled.status_code == 200
    new = re.search(r'<code id="secret">(whsec_[^<]+)</code>', rolled.content.decode()).group(1)
    endpoint.refresh_from_db()
    assert (decrypt(endpoint.secret_encrypted), decrypt(endpoint.previous_secret_encrypted)) == (new, secret)
    delivery = Delivery.objects.get(endpoint=endpoint)
    assert client.post(page_url(team, f"deliveries/{delivery.pk}/resend")).status_code == 302
    delivery.refresh_from_db()
    assert (delivery.status, delivery.next_attempt_at is not None) == (Delivery.Status.PENDING, True)
    assert client.post(page_url(team, f"webhooks/{endpoint.pk}/active"), {"is_active": "false"}).status_code == 302
    assert not Endpoint.objects.get(pk=endpoint.pk).is_active
    assert client.post(page_url(team, f"webhooks/{endpoint.pk}/delete")).status_code == 200  # asked first
    assert Endpoint.objects.exists()
    assert client.post(page_url(team, f"webhooks/{endpoint.pk}/delete"), {"confirmed": "yes"}).status_code == 302
    assert not Endpoint.objects.exists()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == [
        "webhook.create", "webhook.test", "webhook.roll_secret", "delivery.resend", "webhook.update",
        "webhook.delete",
    ]  # fmt: skip
    assert not any(s in str(e.detail) for e in AuditEntry.objects.all() for s in (secret, new))


def test_an_owner_adds_and_deletes_a_contact(team):
    client = browser(team.owner)
    added = client.post(
        page_url(team, "contacts"), {"email": "billing@acme.test", "events": ["spend.threshold_reached"]}
    )
    assert added.status_code == 302
    assert added["Location"].endswith("#contacts")
    contact = Contact.objects.get(subscription=team.subscription)
    assert (contact.email, contact.events) == ("billing@acme.test", ["spend.threshold_reached"])
    assert contact.confirmed_at is None
    assert mail.outbox[0].to == ["billing@acme.test"]
    assert "/usage/account/confirm/?token=" in mail.outbox[0].body
    assert "it is sent nothing until" in client.get(added["Location"]).content.decode()
    asked = client.post(page_url(team, f"contacts/{contact.pk}/delete"))
    assert (asked.status_code, Contact.objects.count()) == (200, 1)
    assert "Delete the contact billing@acme.test?" in asked.content.decode()
    assert client.post(page_url(team, f"contacts/{contact.pk}/delete"), {"confirmed": "yes"}).status_code == 302
    assert not Contact.objects.exists()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["contact.create", "contact.delete"]


@pytest.mark.parametrize(
    ("tail", "data", "says"),
    [
        ("keys", {"expires_at": "2020-01-01T00:00"}, "This moment is in the past"),
        ("keys", {"name": "x" * 101}, "Ensure this value has at most 100 characters"),
        ("keys/{key}/roll", {"overlap_seconds": "5"}, "Select a valid choice"),
        ("webhooks", {"url": "https://127.0.0.1/hook"}, "Not sent to: its host does not resolve"),
        ("webhooks", {"url": "not a url"}, "Enter a valid URL"),
        ("webhooks", {"url": "https://hooks.example.com/x", "events": ["nope"]}, "Select a valid choice"),
        ("webhooks/{endpoint}/active", {"is_active": "maybe"}, "Select a valid choice"),
        ("webhooks/{endpoint}/roll-secret", {}, "This field is required"),
        ("contacts", {"email": "not-an-address"}, "Enter a valid email address"),
        ("contacts", {"email": "ops@acme.test"}, "a contact of the subscription already"),
    ],
)
def test_a_bad_input_answers_400_with_its_reason_and_changes_nothing(team, stock, tail, data, says):
    before = (APIKey.objects.count(), list(Endpoint.objects.values()), Contact.objects.count())
    response = browser(team.owner).post(route(team, stock, tail), data)
    assert response.status_code == 400
    assert says in response.content.decode()
    assert (APIKey.objects.count(), list(Endpoint.objects.values()), Contact.objects.count()) == before
    assert not AuditEntry.objects.exists()


def test_a_revoked_key_cannot_be_rolled_and_a_pending_delivery_is_not_queued_twice(team, stock):
    client = browser(team.owner)
    client.post(route(team, stock, "keys/{key}/revoke"), {"confirmed": "yes"})
    refused = client.post(route(team, stock, "keys/{key}/roll"), {"overlap_seconds": "0"})
    assert refused.status_code == 400
    assert "This key is revoked" in refused.content.decode()
    assert client.post(route(team, stock, "deliveries/{delivery}/resend")).status_code == 302
    again = client.post(route(team, stock, "deliveries/{delivery}/resend"))
    assert again.status_code == 409
    assert "pending already" in again.content.decode()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["key.revoke", "delivery.resend"]


def test_a_second_test_while_one_is_pending_is_a_409_with_the_reason(team, stock):
    """One test at a time per endpoint: the page answers 409 with why, and nothing more is recorded."""
    client = browser(team.owner)
    assert client.post(route(team, stock, "webhooks/{endpoint}/test")).status_code == 302
    again = client.post(route(team, stock, "webhooks/{endpoint}/test"))
    assert again.status_code == 409
    assert "last test event" in again.content.decode()
    assert "is still pending" in again.content.decode()
    assert Delivery.objects.filter(event__type="webhook.test").count() == 1
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["webhook.test"]
