"""What the watcher finds without a signal: a ban and its end, a key about to expire, refusals that go on; each
recorded once and delivered to the receiver."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from notifications.dispatch import dispatch_due
from notifications.models import Endpoint, Event
from notifications.watch import watch
from plans.models import APIKey, ClientBan
from quotas.engine import default_engine
from tests.factories import EndpointLimitFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def every_event(metered):
    """The metered subscription's endpoint wants every event type."""
    Endpoint.objects.update(events=[])
    return metered


def types(receiver) -> list[str]:
    return [json.loads(r.body)["type"] for r in receiver.requests]


def test_a_ban_and_its_end_are_found_once_each(every_event, receiver, internal_allowed, matches_schema):
    """A ban found by one look, its lifting by the next; looking again records nothing more."""
    sub = every_event.subscription
    ban = ClientBan.objects.create(client=f"s.{sub.pk}", subscription=sub, until=timezone.now() + timedelta(hours=1))
    assert watch().recorded == {"client.banned": 1}
    ClientBan.objects.filter(pk=ban.pk).update(lifted_at=timezone.now())
    assert watch().recorded == {"client.ban_ended": 1}
    assert watch().recorded == {}
    dispatch_due()
    assert sorted(types(receiver)) == ["client.ban_ended", "client.banned"]
    assert [matches_schema(json.loads(r.body)) for r in receiver.requests] == [[], []]
    ended = next(json.loads(r.body) for r in receiver.requests if b"ban_ended" in r.body)
    assert (ended["data"]["how"], ended["data"]["ban"]) == ("lifted", ban.pk)
    assert {m.subject for m in mail.outbox} == {"API access suspended", "API access restored"}


def test_an_expired_ban_ends_by_itself(every_event, receiver, internal_allowed):
    sub = every_event.subscription
    ClientBan.objects.create(client=f"s.{sub.pk}", subscription=sub, until=timezone.now() - timedelta(minutes=1))
    assert watch().recorded == {"client.banned": 1, "client.ban_ended": 1}
    assert Event.objects.get(type="client.ban_ended").data["how"] == "expired"


def test_a_key_expiring_within_the_notice_is_announced_once(every_event, receiver, internal_allowed, matches_schema):
    """A key expiring in 3 days (notice: 7) is announced; one in 30 days and a revoked one are not."""
    sub = every_event.subscription
    soon, _ = APIKey.issue(sub, name="ci", expires_at=timezone.now() + timedelta(days=3))
    APIKey.issue(sub, name="later", expires_at=timezone.now() + timedelta(days=30))
    revoked, _ = APIKey.issue(sub, name="old", expires_at=timezone.now() + timedelta(days=2))
    APIKey.objects.filter(pk=revoked.pk).update(revoked_at=timezone.now())
    assert watch().recorded == {"api_key.expiring": 1}
    assert watch().recorded == {}
    dispatch_due()
    (got,) = [json.loads(r.body) for r in receiver.requests]
    assert matches_schema(got) == []
    assert got["data"]["key"] == {"id": soon.pk, "name": "ci", "prefix": soon.prefix}
    assert any(m.subject.startswith(f"API key {soon.prefix}") for m in mail.outbox)


def test_sustained_refusals_are_found_from_the_engines_history(every_event, receiver, set_quotas, matches_schema):
    """With REFUSALS_ALERT 3 and a 2/min limit, 7 requests leave 5 refused in the subscriber's history: one
    refusals.sustained event for the hour, however often the watcher looks."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "REFUSALS_ALERT": 3})
    EndpointLimitFactory(plan=every_event.subscription.plan, name="global", rates="2/min", algorithm="fixed_window")
    default_engine.runtime().rules.invalidate()
    api = APIClient()
    statuses = [api.get("/api/demo/ping", HTTP_X_API_KEY=every_event.key).status_code for _ in range(7)]
    assert statuses.count(429) == 5
    default_engine.runtime().tick()  # the poller writes the history about once a second
    assert watch().recorded == {"refusals.sustained": 1}
    assert watch().recorded == {}
    event = Event.objects.get(type="refusals.sustained")
    assert (event.data["refused"], event.data["window_seconds"]) == (5, 300)
    dispatch_due()
    (got,) = [json.loads(r.body) for r in receiver.requests]
    assert matches_schema(got) == []
