"""A subscription's owners manage its webhooks over HTTP, against a real local receiver: register (the admin's
SSRF guard), test, roll the secret with an overlap (both signatures meanwhile, checked with the docs' verify
function), list and resend deliveries; members and keys read, another subscription's people find nothing, and
every change is in the audit log with its actor."""

from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from console.models import AuditEntry
from notifications.dispatch import dispatch_due
from notifications.models import Delivery, Endpoint
from notifications.record import record_event
from tests.notifications.test_webhooks import documented_verifier

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

DAY = 86_400


@pytest.fixture(autouse=True)
def no_console_rate(set_quotas):
    """The console's own rate limit (60/min) off: these tests make many calls in a row."""
    set_quotas("CONSOLE", API_RATE=None)


def register(api, team, url, **extra):
    response = api.post(team.url("webhooks"), {"url": url, **extra}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def banned(team, key):
    """Record a ``client.banned`` event of the team's subscription (a delivery per endpoint that wants it)."""
    data = {"subscription": {"id": team.subscription.pk, "name": "Acme", "plan": "pro"}, "client": "k", "ban": 1,
            "until": "2026-11-28T00:00:00Z"}  # fmt: skip
    return record_event("client.banned", team.subscription, key, data, timezone.now())


def actions(team):
    return [(e.actor_name, e.action) for e in AuditEntry.objects.filter(subscription=team.subscription)][::-1]


def test_an_owner_registers_an_endpoint_and_its_secret_is_shown_once(team, owner_api, member_api, receiver,
                                                                     internal_allowed):  # fmt: skip
    """The answer to POST carries the secret; lists and reads never do, nor the audit log."""
    made = register(owner_api, team, receiver.url, events=["budget.threshold_crossed"], description="billing")
    assert made["secret"].startswith("whsec_")
    assert (made["url"], made["events"], made["description"], made["is_active"]) == (
        receiver.url, ["budget.threshold_crossed"], "billing", True)  # fmt: skip
    listed = member_api.get(team.url("webhooks")).json()
    assert [e["id"] for e in listed] == [made["id"]]
    read = owner_api.get(team.url(f"webhooks/{made['id']}")).json()
    assert "secret" not in listed[0]
    assert "secret" not in read
    (entry,) = AuditEntry.objects.all()
    assert (entry.actor_name, entry.action, entry.target) == ("olivia", "webhook.create", receiver.url)
    assert made["secret"] not in json.dumps(entry.detail)


def test_a_refused_url_is_a_400_naming_why(team, owner_api, set_quotas):
    """The admin's guard: by default only https:// (the loopback receiver's http:// is refused for that); with
    http allowed, an internal address is refused without telling which address the host resolved to."""
    refused = owner_api.post(team.url("webhooks"), {"url": "http://127.0.0.1:9/hook"}, format="json")
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["errors"] == {"url": "Not sent to: only https:// URLs are allowed."}
    private = owner_api.post(team.url("webhooks"), {"url": "https://10.1.2.3/hook"}, format="json").json()
    assert private["errors"]["url"] == (
        "Not sent to: its host does not resolve, or does not resolve to a public address."
    )
    set_quotas(NOTIFICATIONS={"ALLOW_HTTP": True})
    loopback = owner_api.post(team.url("webhooks"), {"url": "http://127.0.0.1:9/hook"}, format="json").json()
    assert "public address" in loopback["errors"]["url"]
    assert "127.0.0.1" not in loopback["errors"]["url"]
    unknown = owner_api.post(team.url("webhooks"), {"url": "https://example.com/h", "events": ["nope"]}, format="json")
    assert "Unknown event type 'nope'" in unknown.json()["errors"]["events"]
    assert Endpoint.objects.count() == 0
    assert AuditEntry.objects.count() == 0


def test_a_test_event_is_queued_at_once_and_the_dispatcher_sends_it(team, owner_api, key_api, receiver,
                                                                     internal_allowed, matches_schema):  # fmt: skip
    """POST .../test answers 202 at once with the webhook.test delivery pending and where to poll it (Location):
    nothing has left yet. The dispatcher sends it (whatever types the endpoint wants), signed with its secret,
    and the delivery read there shows the receiver's answer after one attempt. A failing test is given up after
    its one attempt and never counted toward disabling the endpoint."""
    made = register(owner_api, team, receiver.url, events=["budget.threshold_crossed"])
    answer = owner_api.post(team.url(f"webhooks/{made['id']}/test"))
    assert answer.status_code == 202
    queued = answer.json()
    assert (queued["status"], queued["attempts"], queued["event"]["type"]) == ("pending", 0, "webhook.test")
    assert answer["Location"] == team.url(f"deliveries/{queued['id']}")
    assert receiver.requests == []
    assert key_api.get(answer["Location"]).json()["status"] == "pending"
    assert dispatch_due().sent == 1
    (got,) = receiver.requests
    sent = json.loads(got.body)
    assert sent["type"] == got.headers["Quota-Event-Type"] == "webhook.test"
    assert sent["data"]["endpoint"] == made["id"]
    assert matches_schema(sent) == []
    assert documented_verifier()(got.headers["Quota-Signature"], got.body, made["secret"])
    done = key_api.get(answer["Location"]).json()
    assert (done["status"], done["attempts"], done["response_status"], done["response"]) == ("succeeded", 1, 200, "ok")
    receiver.statuses = [500]
    failing = owner_api.post(team.url(f"webhooks/{made['id']}/test"))
    assert failing.status_code == 202
    assert dispatch_due().given_up == 1
    failed = owner_api.get(failing["Location"]).json()
    assert (failed["status"], failed["attempts"], failed["response_status"]) == ("failed", 1, 500)
    assert (failed["error"], failed["error_description"]) == ("http_status", "answered a status other than 2xx")
    assert Endpoint.objects.get().consecutive_failures == 0  # a test asked for never counts toward disabling
    assert dispatch_due(timezone.now() + timedelta(days=2)).sent == 0  # never retried
    assert len(receiver.requests) == 2
    assert actions(team)[-2:] == [("olivia", "webhook.test"), ("olivia", "webhook.test")]
    assert AuditEntry.objects.filter(action="webhook.test").first().detail["delivery"] == failed["id"]


def test_a_second_test_while_one_is_pending_is_a_409(team, owner_api, receiver, internal_allowed):
    """One test at a time per endpoint: the second answers 409 problem+json naming the pending delivery, and
    records nothing; once the dispatcher sent the first, a new one is accepted."""
    made = register(owner_api, team, receiver.url)
    first = owner_api.post(team.url(f"webhooks/{made['id']}/test")).json()
    again = owner_api.post(team.url(f"webhooks/{made['id']}/test"))
    assert again.status_code == 409
    assert again["Content-Type"] == "application/problem+json"
    assert f"last test event (delivery {first['id']}) is still pending" in again.json()["detail"]
    assert Delivery.objects.count() == 1
    assert [a for _, a in actions(team)] == ["webhook.create", "webhook.test"]
    dispatch_due()
    assert owner_api.post(team.url(f"webhooks/{made['id']}/test")).status_code == 202


def test_a_disabled_endpoint_may_be_tested(team, owner_api, receiver, internal_allowed):
    """Its owner tests it before enabling it: the test is sent and succeeds; the endpoint stays disabled."""
    made = register(owner_api, team, receiver.url)
    owner_api.patch(team.url(f"webhooks/{made['id']}"), {"is_active": False}, format="json")
    answer = owner_api.post(team.url(f"webhooks/{made['id']}/test"))
    assert answer.status_code == 202
    assert dispatch_due().sent == 1
    assert len(receiver.requests) == 1
    assert owner_api.get(answer["Location"]).json()["status"] == "succeeded"
    assert not Endpoint.objects.get().is_active


def test_a_test_shows_a_timeout_a_connection_failure_and_a_refused_url(team, owner_api, set_quotas):
    """A receiver that never answers is a timeout; a closed port a failed connection; a URL the settings no longer
    allow is refused, never connected to. The request answers before any of it: the dispatcher finds out."""
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "TIMEOUT": 0.3})
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections (the backlog) and never answers
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()

    def tested(endpoint: dict) -> dict:
        answer = owner_api.post(team.url(f"webhooks/{endpoint['id']}/test"))
        assert (answer.status_code, answer.json()["status"]) == (202, "pending")
        dispatch_due()
        return owner_api.get(answer["Location"]).json()

    try:
        mute = register(owner_api, team, f"http://127.0.0.1:{silent.getsockname()[1]}/h")
        gone = register(owner_api, team, f"http://127.0.0.1:{closed_port}/h")
        assert tested(mute)["error"] == "timeout"
        assert tested(gone)["error"] == "connection_failed"
        set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True})  # http:// no longer allowed
        refused = tested(gone)
        assert (refused["status"], refused["attempts"], refused["error"]) == ("failed", 1, "refused_url")
        assert refused["error_description"] == "URL not allowed (scheme or port)"
        assert Endpoint.objects.get(pk=gone["id"]).consecutive_failures == 0
    finally:
        silent.close()


def test_rolling_with_an_overlap_signs_with_both_secrets_until_it_ends(team, owner_api, receiver, internal_allowed):
    """After a roll with an hour's overlap, a delivery carries two v1= signatures: the docs' function accepts it
    with the old secret and with the new. Sent after the hour (the dispatcher's clock moved), only the new
    secret signs it."""
    made = register(owner_api, team, receiver.url)
    rolled = owner_api.post(team.url(f"webhooks/{made['id']}/roll_secret"), {"overlap_seconds": 3600}, format="json")
    assert rolled.status_code == 200
    old, new = made["secret"], rolled.json()["secret"]
    assert new.startswith("whsec_")
    assert new != old
    assert rolled.json()["previous_secret_expires_at"] is not None
    verify = documented_verifier()
    banned(team, "during")
    assert dispatch_due().sent == 1
    during = receiver.requests[-1]
    header = during.headers["Quota-Signature"]
    assert header.count("v1=") == 2
    assert verify(header, during.body, old)
    assert verify(header, during.body, new)
    assert not verify(header, during.body, "whsec_another")
    banned(team, "after")
    later = timezone.now() + timedelta(seconds=3601)
    assert dispatch_due(later, clock=later.timestamp).sent == 1
    after = receiver.requests[-1]
    header = after.headers["Quota-Signature"]
    assert header.count("v1=") == 1
    # Signed an hour ahead of this machine's clock: the receiver's tolerance is widened to match.
    assert verify(header, after.body, new, tolerance=2 * 3600)
    assert not verify(header, after.body, old, tolerance=2 * 3600)
    (entry,) = AuditEntry.objects.filter(action="webhook.roll_secret")
    assert (entry.actor_name, entry.detail["overlap_seconds"]) == ("olivia", 3600)
    assert old not in json.dumps(entry.detail)
    assert new not in json.dumps(entry.detail)


def test_rolling_without_an_overlap_stops_the_old_secret_at_once(team, owner_api, receiver, internal_allowed):
    made = register(owner_api, team, receiver.url)
    too_long = owner_api.post(team.url(f"webhooks/{made['id']}/roll_secret"), {"overlap_seconds": 7 * DAY + 1})
    assert too_long.status_code == 400
    assert "overlap_seconds" in too_long.json()["errors"]
    new = owner_api.post(team.url(f"webhooks/{made['id']}/roll_secret"), {"overlap_seconds": 0}).json()["secret"]
    owner_api.post(team.url(f"webhooks/{made['id']}/test"))
    dispatch_due()
    (got,) = receiver.requests
    assert got.headers["Quota-Signature"].count("v1=") == 1
    assert documented_verifier()(got.headers["Quota-Signature"], got.body, new)
    assert not documented_verifier()(got.headers["Quota-Signature"], got.body, made["secret"])


def test_deliveries_are_listed_and_one_is_sent_again(team, owner_api, key_api, receiver, internal_allowed):
    """The endpoint's deliveries (latest first, the answer cut to 200 characters, the failure's kind); a resent
    one is due at once and the dispatcher sends the same event again; one pending already is a 409."""
    made = register(owner_api, team, receiver.url)
    event = banned(team, "one")
    receiver.statuses = [503]
    dispatch_due()
    (listed,) = key_api.get(team.url(f"webhooks/{made['id']}/deliveries")).json()
    assert listed["event"] == {"id": str(event.id), "type": "client.banned"}
    assert (listed["status"], listed["attempts"], listed["response_status"]) == ("pending", 1, 503)
    assert (listed["response"], listed["error"]) == ("receiver failed", "http_status")
    assert owner_api.post(team.url(f"deliveries/{listed['id']}/resend")).status_code == 409  # waiting to retry
    Delivery.objects.update(status="failed", next_attempt_at=None)  # given up, say
    resent = owner_api.post(team.url(f"deliveries/{listed['id']}/resend"))
    assert resent.status_code == 202
    assert resent.json()["status"] == "pending"
    assert dispatch_due().sent == 1
    assert [json.loads(r.body)["id"] for r in receiver.requests] == [str(event.id)] * 2
    (again,) = owner_api.get(team.url(f"webhooks/{made['id']}/deliveries")).json()
    assert (again["status"], again["attempts"], again["response_status"]) == ("succeeded", 2, 200)
    (entry,) = AuditEntry.objects.filter(action="delivery.resend")
    assert (entry.actor_name, entry.target, entry.detail["event"]) == ("olivia", receiver.url, str(event.id))


def test_an_owner_edits_and_deletes_an_endpoint(team, owner_api, receiver, internal_allowed, set_quotas):
    """PATCH changes what it names (a new URL passes the guard again); enabling a disabled endpoint forgets its
    failures; DELETE removes it and its deliveries; each change in the audit log."""
    made = register(owner_api, team, receiver.url)
    Endpoint.objects.update(is_active=False, consecutive_failures=20, disabled_reason="disabled after 20 failed")
    url = team.url(f"webhooks/{made['id']}")
    edited = owner_api.patch(url, {"events": ["client.banned"], "is_active": True, "description": "ops"}, format="json")
    assert edited.status_code == 200
    body = edited.json()
    assert (body["events"], body["is_active"], body["consecutive_failures"], body["disabled_reason"]) == (
        ["client.banned"], True, 0, "")  # fmt: skip
    set_quotas(NOTIFICATIONS={"ALLOW_HTTP": True})  # internal addresses refused again
    refused = owner_api.patch(url, {"url": "https://10.0.0.1/x"}, format="json")
    assert refused.status_code == 400
    assert "public address" in refused.json()["errors"]["url"]
    assert Endpoint.objects.get().url == receiver.url
    banned(team, "x")
    assert owner_api.delete(url).status_code == 204
    assert not Endpoint.objects.exists()
    assert not Delivery.objects.exists()
    assert owner_api.get(url).status_code == 404
    assert actions(team) == [("olivia", "webhook.create"), ("olivia", "webhook.update"), ("olivia", "webhook.delete")]
    update = AuditEntry.objects.get(action="webhook.update")
    assert update.detail["changed"] == {"events": ["client.banned"], "description": "ops", "is_active": True}


def test_members_and_keys_read_and_may_change_nothing(team, owner_api, member_api, key_api, receiver,
                                                     internal_allowed):  # fmt: skip
    made = register(owner_api, team, receiver.url)
    banned(team, "one")
    delivery = Delivery.objects.get()
    one = f"webhooks/{made['id']}"
    for client in (member_api, key_api):
        for path in ("webhooks", one, f"{one}/deliveries", f"deliveries/{delivery.pk}"):
            assert client.get(team.url(path)).status_code == 200, path
        changes = [
            client.post(team.url("webhooks"), {"url": receiver.url}, format="json"),
            client.patch(team.url(one), {"description": "x"}, format="json"),
            client.delete(team.url(one)),
            client.post(team.url(f"{one}/test")),
            client.post(team.url(f"{one}/roll_secret"), {"overlap_seconds": 0}, format="json"),
            client.post(team.url(f"deliveries/{delivery.pk}/resend")),
        ]
        assert [r.status_code for r in changes] == [403] * 6
        assert {r["Content-Type"] for r in changes} == {"application/problem+json"}
    assert receiver.requests == []
    assert actions(team) == [("olivia", "webhook.create")]


def test_another_subscriptions_people_find_nothing(team, other_team, owner_api, stranger_api, receiver,
                                                   internal_allowed):  # fmt: skip
    """A subscription's endpoints and deliveries are 404 to the owner of another, by that subscription's URL and
    by their own (an id of another subscription's endpoint under theirs)."""
    made = register(owner_api, team, receiver.url)
    banned(team, "one")
    delivery = Delivery.objects.get()
    one = f"webhooks/{made['id']}"
    responses = [
        stranger_api.get(team.url("webhooks")),
        stranger_api.post(team.url("webhooks"), {"url": receiver.url}, format="json"),
        stranger_api.get(team.url(one)),
        stranger_api.patch(team.url(one), {"description": "x"}, format="json"),
        stranger_api.delete(team.url(one)),
        stranger_api.post(team.url(f"{one}/test")),
        stranger_api.post(team.url(f"{one}/roll_secret"), {"overlap_seconds": 0}, format="json"),
        stranger_api.get(team.url(f"{one}/deliveries")),
        stranger_api.post(team.url(f"deliveries/{delivery.pk}/resend")),
        stranger_api.get(team.url(f"deliveries/{delivery.pk}")),
        # their own subscription's URL, this subscription's ids
        stranger_api.get(other_team.url(one)),
        stranger_api.patch(other_team.url(one), {"description": "x"}, format="json"),
        stranger_api.delete(other_team.url(one)),
        stranger_api.post(other_team.url(f"{one}/test")),
        stranger_api.post(other_team.url(f"{one}/roll_secret"), {"overlap_seconds": 0}, format="json"),
        stranger_api.get(other_team.url(f"{one}/deliveries")),
        stranger_api.post(other_team.url(f"deliveries/{delivery.pk}/resend")),
        stranger_api.get(other_team.url(f"deliveries/{delivery.pk}")),
    ]
    assert [r.status_code for r in responses] == [404] * len(responses)
    assert receiver.requests == []
    assert Endpoint.objects.count() == 1
    assert stranger_api.get(other_team.url("webhooks")).json() == []
