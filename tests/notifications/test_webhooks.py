"""Customer notifications end to end: from the request that crosses a budget threshold to a signed webhook at a
real HTTP receiver and an e-mail in Django's outbox; retries, idempotency, disabling and the SSRF refusal."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from notifications.dispatch import dispatch_due
from notifications.manage import Invalid, checked_url
from notifications.models import Delivery, Endpoint, Event
from notifications.record import record_event
from notifications.secrets import encrypt
from tests.doc_blocks import doc_block
from tests.slow_dns import DOMAIN, slow_resolver

ROOT = Path(__file__).resolve().parents[2]


def documented_verifier():
    """``verify_signature`` exactly as docs/notifications.md shows it to receivers."""
    code = doc_block("notifications.md", "notifications-verify")
    scope: dict = {}
    exec(compile(code, "docs/notifications.md", "exec"), scope)
    return scope["verify_signature"]


def spend(metered, n: int) -> list[int]:
    api = APIClient()
    return [api.get("/t/priced", HTTP_X_API_KEY=metered.key).status_code for _ in range(n)]


pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def test_a_budget_crossing_reaches_the_receiver_signed_and_the_contact_by_email(metered, receiver, internal_allowed):
    """4 priced requests spend 80 % of the 0.05 budget: nothing is sent on the request path; the dispatcher
    POSTs one signed body that the documented check accepts, and e-mails the contact."""
    assert spend(metered, 4) == [200] * 4
    assert receiver.requests == []  # recorded only, not sent by the request
    assert mail.outbox == []
    (event,) = Event.objects.all()
    report = dispatch_due()
    assert (report.sent, report.failed) == (2, 0)
    (got,) = receiver.requests
    body = json.loads(got.body)
    assert body["id"] == str(event.id) == got.headers["Quota-Event-Id"]
    assert body["type"] == got.headers["Quota-Event-Type"] == "budget.threshold_crossed"
    assert body["data"]["threshold"] == 80
    assert (body["data"]["spent"], body["data"]["amount"], body["data"]["currency"]) == ("0.040000", "0.050000", "USD")
    assert body["data"]["subscription"]["id"] == metered.subscription.pk
    verify = documented_verifier()
    assert verify(got.headers["Quota-Signature"], got.body, metered.secret)
    assert not verify(got.headers["Quota-Signature"], got.body + b" ", metered.secret)  # a changed body
    assert not verify(got.headers["Quota-Signature"], got.body, "whsec_another")
    (email,) = mail.outbox
    assert email.to == ["billing@acme.example"]
    assert email.subject == "Budget day-budget at 80 %"
    assert "0.04 USD of its 0.05 USD" in email.body  # people read money through format_money


def test_an_old_timestamp_is_refused_by_the_documented_check(metered, receiver, internal_allowed):
    """A delivery signed ten minutes ago (a replay) fails the page's check, though its signature is right."""
    spend(metered, 4)
    ten_minutes_ago = timezone.now() - timedelta(minutes=10)
    Delivery.objects.update(next_attempt_at=ten_minutes_ago)
    dispatch_due(ten_minutes_ago, clock=ten_minutes_ago.timestamp)  # signed with a clock ten minutes slow
    (got,) = receiver.requests
    assert not documented_verifier()(got.headers["Quota-Signature"], got.body, metered.secret)


def test_a_receiver_failing_twice_gets_the_event_on_the_third_attempt_with_backoff(metered, receiver, internal_allowed):
    """500, 500, then 200: retried after 30 s, then 60 s more; the same event id each time; then done."""
    receiver.statuses = [500, 500]
    spend(metered, 4)
    Delivery.objects.filter(contact__isnull=False).delete()  # the webhook alone
    now = timezone.now()
    assert dispatch_due(now).failed == 1
    assert dispatch_due(now + timedelta(seconds=29)).failed == 0  # not due yet
    assert dispatch_due(now + timedelta(seconds=30)).failed == 1
    assert dispatch_due(now + timedelta(seconds=89)).sent == 0
    assert dispatch_due(now + timedelta(seconds=90)).sent == 1
    assert len({json.loads(r.body)["id"] for r in receiver.requests}) == 1
    assert len(receiver.requests) == 3
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("succeeded", 3, 200)
    assert Endpoint.objects.get().consecutive_failures == 0


def test_each_event_is_delivered_once(metered, receiver, internal_allowed):
    """Dispatching again sends nothing more, and the same crossing signalled again records no second event."""
    spend(metered, 4)
    dispatch_due()
    dispatch_due()
    event = Event.objects.get()
    assert record_event(event.type, metered.subscription, event.dedupe_key, event.data, timezone.now()) is None
    dispatch_due()
    assert len(receiver.requests) == 1
    assert Event.objects.count() == 1


def test_an_endpoint_that_keeps_failing_is_disabled_and_its_owner_told(metered, receiver, set_quotas):
    """With DISABLE_AFTER 3, three failed attempts disable the endpoint; the contact gets endpoint.disabled;
    the next crossing's webhook is not attempted."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "DISABLE_AFTER": 3})
    receiver.statuses = [503] * 10
    spend(metered, 4)
    now = timezone.now()
    for seconds in (0, 30, 90):
        dispatch_due(now + timedelta(seconds=seconds))
    endpoint = Endpoint.objects.get()
    assert (endpoint.is_active, endpoint.consecutive_failures) == (False, 3)
    assert "3 failed attempts" in endpoint.disabled_reason
    dispatch_due(now + timedelta(seconds=91))
    assert [m.subject for m in mail.outbox] == ["Budget day-budget at 80 %", "Webhook endpoint disabled"]
    assert len(receiver.requests) == 3
    spend(metered, 1)  # 100 %: a new event, not sent to the disabled endpoint
    dispatch_due(now + timedelta(seconds=200))
    assert len(receiver.requests) == 3
    assert Event.objects.filter(type="budget.threshold_crossed").count() == 2


def test_an_internal_address_is_refused_and_never_connected_to(metered, receiver):
    """By default (no ALLOW_PRIVATE_ADDRESSES, no ALLOW_HTTP) the loopback receiver is refused: given up at
    once, with the reason, and the receiver hears nothing."""
    spend(metered, 4)
    report = dispatch_due()
    assert report.given_up == 1
    assert receiver.requests == []
    delivery = Delivery.objects.get(endpoint__isnull=False)
    assert delivery.status == "failed"
    assert delivery.error.startswith("refused: only https:// URLs")


def test_a_private_address_over_https_is_refused_too(metered, receiver, set_quotas):
    set_quotas(NOTIFICATIONS={"ALLOW_HTTP": True})
    spend(metered, 4)
    dispatch_due()
    delivery = Delivery.objects.get(endpoint__isnull=False)
    assert "resolves to an internal address (127.0.0.1)" in delivery.error
    assert receiver.requests == []


def test_every_body_sent_matches_the_shipped_json_schema(metered, receiver, internal_allowed, matches_schema):
    """notifications/event.schema.json describes the bodies exactly: both crossings sent, and the docs page's
    example body; a body with money as a number does not match."""
    Endpoint.objects.update(events=[])  # every type
    spend(metered, 5)  # 80 % and 100 %
    dispatch_due()
    bodies = [json.loads(r.body) for r in receiver.requests]
    assert sorted(b["data"]["threshold"] for b in bodies) == [80, 100]
    example = doc_block("notifications.md", "notifications-body", "json")
    for body in [*bodies, json.loads(example)]:
        assert matches_schema(body) == [], body
    wrong = {**bodies[0], "data": {**bodies[0]["data"], "spent": 0.04}}  # money as a number: not the format
    assert matches_schema(wrong)


def test_the_documented_check_accepts_any_of_several_signatures(metered, receiver, internal_allowed):
    """While a secret is rolled the header carries v1= per secret: the page's function accepts the body with
    either secret and refuses others; a header without t=, with two, or without any v1= is refused."""
    metered.endpoint.previous_secret_encrypted = encrypt("whsec_old")
    metered.endpoint.previous_secret_expires_at = timezone.now() + timedelta(hours=1)
    metered.endpoint.save()
    spend(metered, 4)
    dispatch_due()
    (got,) = receiver.requests
    header, verify = got.headers["Quota-Signature"], documented_verifier()
    t, new, old = header.split(",")
    assert t.startswith("t=")
    assert new.startswith("v1=")
    assert old.startswith("v1=")
    assert verify(header, got.body, metered.secret)
    assert verify(header, got.body, "whsec_old")
    assert verify(f"{t},{old},{new}", got.body, metered.secret)  # order does not matter
    assert not verify(header, got.body, "whsec_another")
    assert not verify(header, got.body + b" ", "whsec_old")
    for broken in (f"{new},{old}", f"{t},{t},{new}", t, f"{t},v2={new[3:]}", ""):
        assert not verify(broken, got.body, metered.secret), broken


@pytest.mark.slow
def test_a_slow_resolver_fails_the_attempt_as_a_timeout_within_timeout(metered, receiver, set_quotas, monkeypatch):
    """The endpoint's host resolves through a DNS server answering after 4 s; with TIMEOUT=1 the attempt fails
    as a ``timeout`` (retried, as a receiver's timeout is) within about a second, and the receiver hears nothing;
    saving such a URL is refused with a clear message after TIMEOUT too."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "TIMEOUT": 1})
    url = receiver.url.replace("127.0.0.1", "hook" + DOMAIN)
    Endpoint.objects.update(url=url)
    spend(metered, 4)
    with slow_resolver(monkeypatch, delay=4.0):
        dispatch_due()
        with pytest.raises(Invalid, match=f"^Not checked: hook{DOMAIN} did not resolve within 1 s; try again later"):
            checked_url(url)
    delivery = Delivery.objects.get(endpoint__isnull=False)
    assert (delivery.status, delivery.failure) == ("pending", "timeout")
    assert delivery.error == f"TimeoutError: hook{DOMAIN} did not resolve within 1 s"
    assert receiver.requests == []
