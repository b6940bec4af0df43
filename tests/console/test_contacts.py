"""A subscription's owners manage its e-mail contacts over HTTP: a new address is mailed one confirmation link
and nothing else until it follows it; a changed address confirms again; members and keys read, another
subscription's people find nothing, and every change (the confirmation too) is in the audit log with its actor."""

from __future__ import annotations

import importlib
import re
from datetime import timedelta
from urllib.parse import unquote, urlencode

import pytest
from django.apps import apps
from django.core import mail
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console.models import AuditEntry
from notifications import contacts
from notifications.dispatch import dispatch_due
from notifications.models import Contact, Delivery
from notifications.record import record_event

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture(autouse=True)
def no_console_rate(set_quotas):
    """The console's own rate limit (60/min) off: these tests make many calls in a row."""
    set_quotas("CONSOLE", API_RATE=None)


def banned(team, key):
    """Record a ``client.banned`` event of the team's subscription: one delivery per contact that wants it."""
    data = {"subscription": {"id": team.subscription.pk, "name": "Acme", "plan": "pro"}, "client": "k", "ban": 1,
            "until": "2026-11-28T00:00:00Z"}  # fmt: skip
    return record_event("client.banned", team.subscription, key, data, timezone.now())


CONFIRM = "/api/v1/contacts/confirm"


def token_in(message) -> str:
    """The token of the link a confirmation e-mail carries (to the page's button)."""
    (token,) = re.findall(r"http://testserver/usage/account/confirm/\?token=(\S+)", message.body)
    return unquote(token)


def confirming(token: str):
    """POST the confirmation of ``token`` to the API, without signing in."""
    return APIClient().post(CONFIRM, {"token": token}, format="json")


def test_a_new_contact_gets_nothing_until_it_confirms_then_the_next_event(team, owner_api):
    """POST mails one confirmation link; an event meanwhile makes no delivery to it; following the link (no
    sign-in) confirms it; the next event is mailed to it."""
    made = owner_api.post(team.url("contacts"), {"email": "ops@acme.example", "events": []}, format="json")
    assert made.status_code == 201
    body = made.json()
    assert (body["email"], body["confirmed"], body["confirmation_sent"]) == ("ops@acme.example", False, True)
    (confirmation,) = mail.outbox
    assert confirmation.to == ["ops@acme.example"]
    assert "Acme" in confirmation.subject
    banned(team, "before")
    assert not Delivery.objects.exists()
    dispatch_due()
    assert len(mail.outbox) == 1  # the confirmation alone
    confirmed = confirming(token_in(confirmation))
    assert confirmed.status_code == 200
    assert confirmed.json() == {"confirmed": True, "email": "ops@acme.example", "subscription": "Acme"}
    assert confirming(token_in(confirmation)).status_code == 200  # again: still confirmed, no second entry
    assert owner_api.get(team.url(f"contacts/{body['id']}")).json()["confirmed"] is True
    banned(team, "after")
    assert dispatch_due().sent == 1
    assert [(m.to, m.subject) for m in mail.outbox[1:]] == [(["ops@acme.example"], "API access suspended")]
    assert [(e.actor_name, e.action) for e in AuditEntry.objects.order_by("pk")] == [
        ("olivia", "contact.create"),
        ("ops@acme.example (confirmation link)", "contact.confirm"),
    ]


def test_a_link_forged_expired_or_of_another_address_confirms_nothing(team, owner_api):
    made = owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json").json()
    contact = Contact.objects.get(pk=made["id"])
    eight_days_ago = timezone.now() - timedelta(days=8)
    tampered = token_in(mail.outbox[0])[:-3] + "abc"
    old = contacts.confirmation_token(contact, eight_days_ago)
    for token in (tampered, old, "x"):
        refused = confirming(token)
        assert refused.status_code == 400, token
        assert refused["Content-Type"] == "application/problem+json"
        assert "not valid" in refused.json()["errors"]["token"]
    assert confirming("").status_code == 400
    assert (
        APIClient().get(f"{CONFIRM}?{urlencode({'token': token_in(mail.outbox[0])})}").status_code == 405
    )  # a fetch changes nothing
    six_days_later = timezone.now() + timedelta(days=6)
    assert contacts.confirm(contacts.confirmation_token(contact), six_days_later)[1] is True  # within 7 days
    Contact.objects.update(confirmed_at=None)
    first = token_in(mail.outbox[0])
    owner_api.patch(team.url(f"contacts/{made['id']}"), {"email": "new@acme.example"}, format="json")
    assert confirming(first).status_code == 400  # the link of the address it no longer has
    assert not Contact.objects.get().confirmed_at


def test_changing_an_address_unconfirms_it_and_mails_the_new_one(team, owner_api):
    """PATCH email: unconfirmed, a link to the new address; a delivery queued for the old address is given up,
    not mailed to the unconfirmed new one. Events and is_active change without confirming again."""
    made = owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json").json()
    confirming(token_in(mail.outbox[0]))
    banned(team, "queued")
    changed = owner_api.patch(team.url(f"contacts/{made['id']}"), {"email": "new@acme.example"}, format="json").json()
    assert (changed["email"], changed["confirmed"], changed["confirmation_sent"]) == ("new@acme.example", False, True)
    assert mail.outbox[-1].to == ["new@acme.example"]
    report = dispatch_due()
    assert (report.sent, report.given_up) == (0, 1)
    assert Delivery.objects.get().failure == "contact_unconfirmed"
    assert len(mail.outbox) == 2  # the two confirmations, nothing else
    confirming(token_in(mail.outbox[-1]))
    edited = owner_api.patch(team.url(f"contacts/{made['id']}"), {"events": ["client.banned"], "is_active": False},
                             format="json").json()  # fmt: skip
    assert (edited["events"], edited["is_active"], edited["confirmed"]) == (["client.banned"], False, True)
    assert "confirmation_sent" not in edited
    assert owner_api.delete(team.url(f"contacts/{made['id']}")).status_code == 204
    assert not Contact.objects.exists()
    assert [e.action for e in AuditEntry.objects.order_by("pk")] == [
        "contact.create", "contact.confirm", "contact.update", "contact.confirm", "contact.update", "contact.delete",
    ]  # fmt: skip


def test_an_address_twice_or_an_unknown_event_type_is_a_400(team, owner_api):
    owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json")
    again = owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json")
    assert again.status_code == 400
    assert "already" in again.json()["errors"]["email"]
    unknown = owner_api.post(team.url("contacts"), {"email": "b@acme.example", "events": ["nope"]}, format="json")
    assert "Unknown event type" in unknown.json()["errors"]["events"]
    not_an_address = owner_api.post(team.url("contacts"), {"email": "nope"}, format="json")
    assert "email" in not_an_address.json()["errors"]
    assert len(mail.outbox) == 1
    assert Contact.objects.count() == 1


def test_a_lost_confirmation_is_sent_again_and_staff_made_contacts_are_confirmed(team, owner_api, quota_clock):
    made = owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json").json()
    quota_clock.advance(600)  # QUOTAS['CONSOLE']['CONFIRMATION_INTERVAL'] later
    again = owner_api.post(team.url(f"contacts/{made['id']}/resend_confirmation"))
    assert again.status_code == 200
    assert len(mail.outbox) == 2
    confirming(token_in(mail.outbox[1]))
    assert owner_api.post(team.url(f"contacts/{made['id']}/resend_confirmation")).status_code == 409
    staff_made = Contact.objects.create(subscription=team.subscription, email="billing@acme.example")
    assert staff_made.confirmed_at is not None  # as the admin and the data of before make them: confirmed
    listed = owner_api.get(team.url("contacts")).json()
    assert [(c["email"], c["confirmed"]) for c in listed] == [
        ("ops@acme.example", True),
        ("billing@acme.example", True),
    ]


def test_members_and_keys_read_and_may_change_nothing(team, owner_api, member_api, key_api):
    made = owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json").json()
    one = f"contacts/{made['id']}"
    for client in (member_api, key_api):
        assert [c["email"] for c in client.get(team.url("contacts")).json()] == ["ops@acme.example"]
        assert client.get(team.url(one)).status_code == 200
        changes = [
            client.post(team.url("contacts"), {"email": "x@acme.example"}, format="json"),
            client.patch(team.url(one), {"events": []}, format="json"),
            client.delete(team.url(one)),
            client.post(team.url(f"{one}/resend_confirmation")),
        ]
        assert [r.status_code for r in changes] == [403] * 4
        assert {r["Content-Type"] for r in changes} == {"application/problem+json"}
    assert len(mail.outbox) == 1
    assert [e.action for e in AuditEntry.objects.all()] == ["contact.create"]


def test_another_subscriptions_people_find_nothing(team, other_team, owner_api, stranger_api):
    made = owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json").json()
    one = f"contacts/{made['id']}"
    responses = [
        stranger_api.get(team.url("contacts")),
        stranger_api.post(team.url("contacts"), {"email": "x@acme.example"}, format="json"),
        stranger_api.get(team.url(one)),
        stranger_api.patch(team.url(one), {"events": []}, format="json"),
        stranger_api.delete(team.url(one)),
        stranger_api.post(team.url(f"{one}/resend_confirmation")),
        stranger_api.get(other_team.url(one)),
        stranger_api.patch(other_team.url(one), {"events": []}, format="json"),
        stranger_api.delete(other_team.url(one)),
        stranger_api.post(other_team.url(f"{one}/resend_confirmation")),
    ]
    assert [r.status_code for r in responses] == [404] * len(responses)
    assert Contact.objects.count() == 1
    assert len(mail.outbox) == 1


def test_the_mails_link_shows_a_button_and_only_pressing_it_confirms(team, owner_api):
    """A mail scanner fetching the link confirms nothing; the reader's press does, without signing in."""
    made = owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json").json()
    page = Client(enforce_csrf_checks=True)
    link = f"/usage/account/confirm/?{urlencode({'token': token_in(mail.outbox[0])})}"
    shown = page.get(link)
    assert shown.status_code == 200
    assert "Confirm this address" in shown.content.decode()
    assert Contact.objects.get(pk=made["id"]).confirmed_at is None
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', shown.content.decode()).group(1)
    done = page.post(link, {"token": token_in(mail.outbox[0]), "csrfmiddlewaretoken": token})
    assert done.status_code == 200
    assert "ops@acme.example is confirmed" in done.content.decode()
    assert Contact.objects.get(pk=made["id"]).confirmed_at is not None
    bad = page.post(link, {"token": "forged", "csrfmiddlewaretoken": token})
    assert bad.status_code == 400
    assert "not valid" in bad.content.decode()


def test_the_audit_log_never_shows_owners_where_a_confirmer_pressed_the_button(team, owner_api):
    """Whoever confirms is not a member of the subscription: the entry of a confirmation, by the page's button
    or the API, keeps no address, in the API's log and on the page; the owner's own entries keep theirs."""
    owner_api.post(team.url("contacts"), {"email": "ops@acme.example"}, format="json", REMOTE_ADDR="203.0.113.7")
    owner_api.post(team.url("contacts"), {"email": "cfo@acme.example"}, format="json", REMOTE_ADDR="203.0.113.7")
    by_page, by_api = (token_in(m) for m in mail.outbox)
    page = Client()
    assert page.post("/usage/account/confirm/", {"token": by_page}, REMOTE_ADDR="198.51.100.23").status_code == 200
    assert APIClient().post(CONFIRM, {"token": by_api}, format="json", REMOTE_ADDR="198.51.100.24").status_code == 200
    log = owner_api.get(team.url("audit")).json()
    assert [(e["action"], e["address"]) for e in log] == [
        ("contact.confirm", None),
        ("contact.confirm", None),
        ("contact.create", "203.0.113.7"),
        ("contact.create", "203.0.113.7"),
    ]
    page.force_login(team.owner)
    shown = page.get(f"/usage/account/{team.subscription.pk}/").content.decode()
    assert "203.0.113.7" in shown
    assert "198.51.100.2" not in shown
    assert not AuditEntry.objects.filter(address__startswith="198.51.100.").exists()  # not kept at all


def test_the_confirmers_addresses_kept_before_are_forgotten_by_the_migration(team):
    migration = importlib.import_module("console.migrations.0002_forget_confirmers_addresses")
    kept = {"subscription": team.subscription, "subscription_name": "Acme", "address": "198.51.100.23"}
    AuditEntry.objects.create(actor_name="ops@acme.example (confirmation link)", action="contact.confirm", **kept)
    AuditEntry.objects.create(actor_name="olivia", action="contact.create", **kept)
    migration.forget_confirmers_addresses(apps, None)
    assert sorted(AuditEntry.objects.values_list("action", "address")) == [
        ("contact.confirm", None),
        ("contact.create", "198.51.100.23"),
    ]
