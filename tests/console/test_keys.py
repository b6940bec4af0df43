"""A subscription's owners manage its API keys over HTTP: create (the raw key shown once), list, revoke, roll
with an overlap; members and keys read only, another subscription's people find nothing; every change is in
the audit log with its actor and address, never a key."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from console.conf import MAX_OVERLAP_SECONDS
from console.models import AuditEntry
from plans.models import APIKey

from .conftest import Team, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

ADDRESS = "203.0.113.7"
#: What a key's listing shows: never the hash nor the raw key.
FIELDS = {"id", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at", "last_used_from",
          "state", "rolled_to", "own_rates", "cap_period", "cap_amount"}  # fmt: skip


def works(raw: str) -> int:
    """The status of an API request made with key ``raw``."""
    return APIClient().get("/api/v1/usage/current", HTTP_X_API_KEY=raw).status_code


def create(api: APIClient, team: Team, **body: object) -> dict:
    response = api.post(team.url("keys"), body, format="json", REMOTE_ADDR=ADDRESS)
    assert response.status_code == 201, response.content
    return response.json()


def test_an_owner_creates_a_key_and_sees_its_secret_once(team, owner_api):
    """The raw key is in the create answer only; the list shows its prefix, never the key or its hash."""
    made = create(owner_api, team, name="ci")
    raw = made["key"]
    assert raw.startswith("qk_")
    assert set(made) == FIELDS | {"key"}
    assert (made["name"], made["prefix"], made["state"], made["expires_at"]) == ("ci", raw[:10], "active", None)
    assert works(raw) == 200
    listed = owner_api.get(team.url("keys"))
    assert listed.status_code == 200
    assert raw not in listed.content.decode()
    assert APIKey.objects.get(pk=made["id"]).key_hash not in listed.content.decode()
    mine = next(k for k in listed.json() if k["id"] == made["id"])
    assert set(mine) == FIELDS
    assert mine["prefix"] == raw[:10]


def test_members_and_keys_list_the_keys(team, member_api, key_api):
    for api in (member_api, key_api):
        listed = api.get(team.url("keys"))
        assert listed.status_code == 200
        assert [k["prefix"] for k in listed.json()] == [team.key[:10]]


def test_a_key_may_expire_at_a_future_moment_and_not_a_past_one(team, owner_api):
    later = timezone.now() + timedelta(days=30)
    made = create(owner_api, team, name="trial", expires_at=later.isoformat())
    assert made["expires_at"] is not None
    past = owner_api.post(team.url("keys"), {"expires_at": "2001-01-01T00:00:00Z"}, format="json")
    assert past.status_code == 400
    assert past["Content-Type"] == "application/problem+json"
    assert "expires_at" in past.json()["errors"]
    bad = owner_api.post(team.url("keys"), {"name": "x" * 101, "expires_at": "soon"}, format="json")
    assert set(bad.json()["errors"]) == {"name", "expires_at"}
    assert APIKey.objects.filter(subscription=team.subscription).count() == 2  # the fixture's and "trial"


def test_a_revoked_key_gets_401_and_revoking_again_changes_nothing(team, owner_api):
    made = create(owner_api, team, name="leaked")
    assert works(made["key"]) == 200
    revoked = owner_api.post(team.url(f"keys/{made['id']}/revoke"), REMOTE_ADDR=ADDRESS)
    assert revoked.status_code == 200
    assert revoked.json()["state"] == "revoked"
    response = APIClient().get("/api/v1/usage/current", HTTP_X_API_KEY=made["key"])
    assert response.status_code == 401
    assert json.loads(response.content)["reason"] == "api_key_revoked"
    again = owner_api.post(team.url(f"keys/{made['id']}/revoke"))
    assert again.status_code == 200
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
    assert AuditEntry.objects.filter(action="key.revoke").count() == 1
    assert works(team.key) == 200  # the subscription's other key is untouched


def test_a_rolled_key_works_during_the_overlap_and_not_after_it(team, owner_api, quota_clock):
    """The old key works for overlap_seconds more, then gets 401 (expired); the new key works throughout."""
    old = create(owner_api, team, name="server")
    rolled = owner_api.post(team.url(f"keys/{old['id']}/roll"), {"overlap_seconds": 3600}, format="json")
    assert rolled.status_code == 201
    new = rolled.json()
    assert new["key"].startswith("qk_")
    assert new["key"] != old["key"]
    assert (new["name"], new["state"]) == ("server", "active")  # the old key's name, as none was given
    assert new["replaces"]["id"] == old["id"]
    assert new["replaces"]["state"] == "rolled"
    assert new["replaces"]["rolled_to"] == new["id"]
    stored = APIKey.objects.get(pk=old["id"])
    assert abs(stored.expires_at - (timezone.now() + timedelta(hours=1))) < timedelta(seconds=5)
    assert works(old["key"]) == 200
    assert works(new["key"]) == 200
    quota_clock.set(stored.expires_at.timestamp() + 1)  # the engine's clock judges a key's expiry, per request
    response = APIClient().get("/api/v1/usage/current", HTTP_X_API_KEY=old["key"])
    assert response.status_code == 401
    assert json.loads(response.content)["reason"] == "api_key_expired"
    assert works(new["key"]) == 200
    listed = {k["id"]: k for k in owner_api.get(team.url("keys")).json()}
    assert listed[old["id"]]["rolled_to"] == new["id"]


def test_a_roll_keeps_an_expiry_sooner_than_the_overlap_and_takes_a_new_name(team, owner_api):
    soon = timezone.now() + timedelta(minutes=10)
    old = create(owner_api, team, name="ci", expires_at=soon.isoformat())
    rolled = owner_api.post(team.url(f"keys/{old['id']}/roll"), {"overlap_seconds": 86_400, "name": "ci-2"},
                            format="json")  # fmt: skip
    assert rolled.status_code == 201
    assert rolled.json()["name"] == "ci-2"
    assert abs(APIKey.objects.get(pk=old["id"]).expires_at - soon) < timedelta(seconds=1)


def test_a_roll_gives_the_new_key_the_old_ones_expiry_or_the_one_sent(team, owner_api):
    """Without expires_at the new key expires when the old one would have (a time-limited key never becomes a
    permanent one by a roll); with one, at that moment; the audit entry says both."""
    ends = timezone.now() + timedelta(days=30)
    old = create(owner_api, team, name="trial", expires_at=ends.isoformat())
    rolled = owner_api.post(team.url(f"keys/{old['id']}/roll"), {"overlap_seconds": 60}, format="json")
    assert rolled.status_code == 201, rolled.content
    new = rolled.json()
    assert new["expires_at"] is not None
    assert abs(APIKey.objects.get(pk=new["id"]).expires_at - ends) < timedelta(seconds=1)
    with_null = owner_api.post(team.url(f"keys/{new['id']}/roll"), {"overlap_seconds": 60, "expires_at": None},
                               format="json")  # fmt: skip
    assert with_null.status_code == 201, with_null.content
    assert abs(APIKey.objects.get(pk=with_null.json()["id"]).expires_at - ends) < timedelta(seconds=1)
    later = timezone.now() + timedelta(days=90)
    chosen = owner_api.post(
        team.url(f"keys/{with_null.json()['id']}/roll"), {"overlap_seconds": 60, "expires_at": later.isoformat()},
        format="json",
    )  # fmt: skip
    assert chosen.status_code == 201, chosen.content
    assert abs(APIKey.objects.get(pk=chosen.json()["id"]).expires_at - later) < timedelta(seconds=1)
    entry = AuditEntry.objects.filter(action="key.roll").order_by("pk").last()
    assert entry.detail["new_expires_at"].startswith(later.date().isoformat())


@pytest.mark.parametrize(
    ("expires_at", "says"),
    [
        ("2001-01-01T00:00:00Z", "in the past"),
        ("next tuesday", "wrong format"),
    ],
)
def test_a_roll_refuses_a_past_or_malformed_expiry(team, owner_api, expires_at, says):
    """A past or unreadable expires_at is a 400 problem+json naming the field; nothing is rolled."""
    old = create(owner_api, team)
    refused = owner_api.post(team.url(f"keys/{old['id']}/roll"), {"overlap_seconds": 60, "expires_at": expires_at},
                             format="json")  # fmt: skip
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    errors = refused.json()["errors"]
    assert set(errors) == {"expires_at"}
    assert says in str(errors["expires_at"])
    assert APIKey.objects.get(pk=old["id"]).rolled_to is None


def test_a_roll_with_no_overlap_ends_the_old_key_at_once(team, owner_api, quota_clock):
    old = create(owner_api, team)
    rolled = owner_api.post(team.url(f"keys/{old['id']}/roll"), {"overlap_seconds": 0}, format="json")
    assert rolled.status_code == 201
    assert rolled.json()["replaces"]["state"] == "expired"
    quota_clock.advance(1)  # the engine's clock, standing at the test's first request, passes the roll's moment
    assert works(old["key"]) == 401
    assert works(rolled.json()["key"]) == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"overlap_seconds": MAX_OVERLAP_SECONDS + 1}, "overlap_seconds"),
        ({"overlap_seconds": -1}, "overlap_seconds"),
        ({}, "overlap_seconds"),
        ({"overlap_seconds": "a week"}, "overlap_seconds"),
        ({"overlap_seconds": 60, "name": "n" * 101}, "name"),
    ],
)
def test_a_roll_refuses_a_bad_overlap_or_name(team, owner_api, body, field):
    """An overlap over seven days (QUOTAS console MAX_OVERLAP_SECONDS), negative or missing is a 400."""
    old = create(owner_api, team)
    refused = owner_api.post(team.url(f"keys/{old['id']}/roll"), body, format="json")
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    assert set(refused.json()["errors"]) == {field}
    assert APIKey.objects.get(pk=old["id"]).rolled_to is None


def test_a_revoked_expired_or_rolled_key_cannot_be_rolled(team, owner_api):
    revoked = create(owner_api, team)
    owner_api.post(team.url(f"keys/{revoked['id']}/revoke"))
    expired, _ = APIKey.issue(team.subscription, expires_at=timezone.now() + timedelta(seconds=30))
    APIKey.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    rolled = create(owner_api, team)
    first = owner_api.post(team.url(f"keys/{rolled['id']}/roll"), {"overlap_seconds": 60}, format="json")
    assert first.status_code == 201
    for key_id, why in ((revoked["id"], "revoked"), (expired.pk, "expired"), (rolled["id"], "rolled already")):
        refused = owner_api.post(team.url(f"keys/{key_id}/roll"), {"overlap_seconds": 60}, format="json")
        assert refused.status_code == 400
        assert refused["Content-Type"] == "application/problem+json"
        assert why in refused.json()["errors"]["key_id"]
    assert AuditEntry.objects.filter(action="key.roll").count() == 1


ROUTES = [("get", "keys"), ("post", "keys"), ("post", "keys/{id}/revoke"), ("post", "keys/{id}/roll")]
CHANGES = [route for route in ROUTES if route[0] == "post"]
BODY = {"name": "x", "overlap_seconds": 60}


def call(api: APIClient, team: Team, route: tuple[str, str], key_id: int) -> object:
    method, tail = route
    return getattr(api, method)(team.url(tail.format(id=key_id)), BODY, format="json")


@pytest.mark.parametrize("route", CHANGES, ids=lambda r: f"{r[0]} {r[1]}")
@pytest.mark.parametrize(("who", "says"), [("member_api", "Members may read"), ("key_api", "An API key cannot")])
def test_members_and_keys_may_not_change_keys(team, request, route, who, says):
    key = APIKey.objects.get(subscription=team.subscription)
    refused = call(request.getfixturevalue(who), team, route, key.pk)
    assert refused.status_code == 403
    assert refused["Content-Type"] == "application/problem+json"
    assert says in refused.json()["detail"]
    assert APIKey.objects.filter(subscription=team.subscription).count() == 1
    key.refresh_from_db()
    assert (key.revoked_at, key.rolled_to) == (None, None)


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r[0]} {r[1]}")
def test_another_subscriptions_owner_finds_nothing(team, other_team, stranger_api, route):
    """The other team's owner gets 404 on every route of this team's keys, and on their own subscription's URL
    naming this team's key."""
    key = APIKey.objects.get(subscription=team.subscription)
    for url_team in (team, other_team):
        response = call(stranger_api, url_team, route, key.pk)
        if route == ("post", "keys") and url_team is other_team:
            continue  # creating a key on one's own subscription is allowed
        if route == ("get", "keys") and url_team is other_team:
            assert key.prefix not in response.content.decode()  # their own list, without this team's key
            continue
        assert response.status_code == 404, (url_team.subscription.name, response.content)
        assert response["Content-Type"] == "application/problem+json"
    key.refresh_from_db()
    assert (key.revoked_at, key.rolled_to) == (None, None)
    assert APIKey.objects.filter(subscription=team.subscription).count() == 1


@pytest.mark.parametrize("route", CHANGES, ids=lambda r: f"{r[0]} {r[1]}")
def test_a_session_post_without_the_csrf_token_is_refused(team, route):
    key = APIKey.objects.get(subscription=team.subscription)
    refused = call(signed_in(team.owner, csrf=True), team, route, key.pk)
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert APIKey.objects.filter(subscription=team.subscription).count() == 1


def test_every_change_is_audited_with_its_actor_and_address_and_never_a_key(team, owner_api):
    made = create(owner_api, team, name="ci", expires_at=(timezone.now() + timedelta(days=1)).isoformat())
    rolled = owner_api.post(team.url(f"keys/{made['id']}/roll"), {"overlap_seconds": 600}, format="json",
                            REMOTE_ADDR=ADDRESS).json()  # fmt: skip
    owner_api.post(team.url(f"keys/{rolled['id']}/revoke"), REMOTE_ADDR=ADDRESS)
    log = owner_api.get(team.url("audit")).json()
    assert [(e["action"], e["actor"], e["address"], e["target"]) for e in log] == [
        ("key.revoke", "olivia", ADDRESS, rolled["prefix"]),
        ("key.roll", "olivia", ADDRESS, made["prefix"]),
        ("key.create", "olivia", ADDRESS, made["prefix"]),
    ]
    assert log[2]["detail"]["name"] == "ci"
    assert log[2]["detail"]["expires_at"]
    assert log[1]["detail"]["overlap_seconds"] == 600
    assert log[1]["detail"]["expires_at"]
    text = json.dumps(log)
    assert made["key"] not in text
    assert rolled["key"] not in text
    assert "key_hash" not in text


def test_the_list_shows_when_and_from_where_each_key_was_last_used(team, owner_api):
    """A key's use reaches the list through the poller and the usage flush, with the client's address."""
    from quotas.engine import default_engine
    from usage.flush import flush_usage

    made = create(owner_api, team)
    used = APIClient().get("/api/v1/usage/current", HTTP_X_API_KEY=made["key"], REMOTE_ADDR="198.51.100.4")
    assert used.status_code == 200
    default_engine.runtime().tick()  # what the poller thread does every second
    flush_usage()
    listed = {k["id"]: k for k in owner_api.get(team.url("keys")).json()}
    assert listed[made["id"]]["last_used_from"] == "198.51.100.4"
    assert listed[made["id"]]["last_used_at"] is not None
