"""A test event its owner asks for is queued, not sent by the request (notifications.manage.send_test), and the
dispatcher sends it with the test's own rules: one attempt, never retried, not counted toward disabling the
endpoint, sent even to a disabled endpoint; one test at a time per endpoint. Against the real local receiver."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from notifications import manage
from notifications.dispatch import dispatch_due
from notifications.models import Delivery, Endpoint, Event
from tests.notifications.test_webhooks import documented_verifier

pytestmark = pytest.mark.django_db


def test_a_test_is_queued_due_now_and_the_dispatcher_sends_it_once(metered, receiver, internal_allowed):
    """Nothing leaves with the call: the delivery is pending, due now. The next dispatch sends it, signed, to
    this endpoint alone, whatever event types it wants; it succeeds in one attempt and leaves the endpoint's
    failures as they were (a test resets nothing either)."""
    Endpoint.objects.filter(pk=metered.endpoint.pk).update(consecutive_failures=3)
    metered.endpoint.refresh_from_db()
    delivery = manage.send_test(metered.endpoint)
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at is not None) == ("pending", 0, True)
    assert receiver.requests == []
    assert dispatch_due().sent == 1
    (got,) = receiver.requests
    assert json.loads(got.body)["type"] == got.headers["Quota-Event-Type"] == "webhook.test"
    assert documented_verifier()(got.headers["Quota-Signature"], got.body, metered.secret)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("succeeded", 1, 200)
    assert Endpoint.objects.get().consecutive_failures == 3


def test_a_failing_test_is_tried_once_and_never_counted_toward_disabling(metered, receiver, set_quotas):
    """With DISABLE_AFTER 1, a test the receiver fails is given up after its one attempt, and the endpoint stays
    enabled with no failure counted; no later dispatch sends it again."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "DISABLE_AFTER": 1})
    receiver.statuses = [500]
    delivery = manage.send_test(metered.endpoint)
    report = dispatch_due()
    assert (report.sent, report.given_up, report.disabled) == (0, 1, 0)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("failed", 1, None)
    assert (delivery.response_status, delivery.failure) == (500, "http_status")
    endpoint = Endpoint.objects.get()
    assert (endpoint.is_active, endpoint.consecutive_failures) == (True, 0)
    dispatch_due(timezone.now() + timedelta(days=2))
    assert len(receiver.requests) == 1


def test_a_disabled_endpoint_is_still_sent_its_test(metered, receiver, internal_allowed):
    """Its owner may test it before enabling it: the test is sent; an event's delivery to it is given up."""
    Endpoint.objects.update(is_active=False, disabled_reason="disabled after 20 failed attempts in a row")
    Delivery.objects.create(event=Event.objects.create(type="budget.threshold_crossed", subscription=None,
                                                       dedupe_key="x", data={}, created_at=timezone.now()),
                            endpoint=metered.endpoint, body="{}", next_attempt_at=timezone.now())  # fmt: skip
    metered.endpoint.refresh_from_db()
    test = manage.send_test(metered.endpoint)
    report = dispatch_due()
    assert (report.sent, report.given_up) == (1, 1)
    (got,) = receiver.requests
    assert got.headers["Quota-Event-Type"] == "webhook.test"
    test.refresh_from_db()
    assert test.status == "succeeded"
    assert Delivery.objects.exclude(pk=test.pk).get().failure == "endpoint_disabled"


def test_one_test_at_a_time_per_endpoint(metered, receiver, internal_allowed):
    """A second test while the first is pending raises InFlight (naming the pending one) and records nothing;
    once the first is sent, another may be queued."""
    first = manage.send_test(metered.endpoint)
    with pytest.raises(manage.InFlight) as raised:
        manage.send_test(metered.endpoint)
    assert raised.value.delivery == first
    assert Delivery.objects.count() == 1
    dispatch_due()
    second = manage.send_test(metered.endpoint)
    assert second.status == "pending"
    assert Delivery.objects.count() == 2


def test_a_test_left_pending_with_no_next_attempt_may_be_queued_again(metered, receiver, internal_allowed):
    """A test the request itself was sending when it died (before tests were queued) is pending with no next
    attempt: no dispatcher ever sends it, so it blocks no new test and resend queues it."""
    stuck = manage.send_test(metered.endpoint)
    Delivery.objects.filter(pk=stuck.pk).update(next_attempt_at=None)
    assert manage.pending_test(metered.endpoint) is None
    assert manage.resend(stuck)
    assert not manage.resend(stuck)  # queued now: pending already
    assert dispatch_due().sent == 1
    stuck.refresh_from_db()
    assert (stuck.status, stuck.attempts) == ("succeeded", 1)
