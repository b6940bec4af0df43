"""API keys that expire, and the date each was last used (recorded off the request path)."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from plans.models import APIKey, Subscription
from quotas.engine import default_engine
from quotas.store.key_use_set import KeyUseSet, last_used_key
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, UserFactory
from usage.flush import flush_usage

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/min")
    return plan


def test_an_expired_key_gets_401_expired(free):
    sub = SubscriptionFactory(plan=free)
    _, raw = APIKey.issue(sub, expires_at=timezone.now() - timedelta(seconds=1))
    _, fresh = APIKey.issue(sub, expires_at=timezone.now() + timedelta(days=1))
    api = APIClient()
    response = api.get("/api/demo/ping", HTTP_X_API_KEY=raw)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["reason"] == "api_key_expired"
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=fresh).status_code == 200


def test_an_expired_key_is_a_failed_authentication(free, settings):
    """Retrying an expired key counts toward the address's limit like any bad key: then 429, Retry-After."""
    settings.QUOTAS = {**settings.QUOTAS, "FAILED_AUTH_LIMITS": {"address": "2/10min", "username": None}}
    _, raw = APIKey.issue(SubscriptionFactory(plan=free), expires_at=timezone.now() - timedelta(seconds=1))
    api = APIClient()
    for _ in range(2):
        expired = api.get("/api/demo/ping", HTTP_X_API_KEY=raw, REMOTE_ADDR="203.0.113.20")
        assert expired.status_code == 401
        assert expired["WWW-Authenticate"].startswith("ApiKey")
    refused = api.get("/api/demo/ping", HTTP_X_API_KEY=raw, REMOTE_ADDR="203.0.113.20")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert json.loads(refused.content)["reason"] == "failed_authentications"


def test_a_key_expires_while_it_is_cached(free, quota_clock):
    """The expiry is checked on every request, not only when the key is looked up."""
    sub = SubscriptionFactory(plan=free)
    expires_at = timezone.now() + timedelta(seconds=60)
    _, raw = APIKey.issue(sub, expires_at=expires_at)
    api = APIClient()
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=raw).status_code == 200  # cached from now on
    quota_clock.set(expires_at.timestamp() + 1)  # the engine's clock judges a cached key's expiry
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=raw).status_code == 401


@pytest.mark.parametrize("value", ["30d", "12h", "90m", "2999-01-31", "2999-01-31T18:00:00+01:00"])
def test_issue_key_expires(free, value):
    out = StringIO()
    call_command("issue_key", "--plan", "free", "--expires", value, stdout=out)
    key = APIKey.objects.get()
    assert key.expires_at > timezone.now()
    assert "valid until" in out.getvalue()


@pytest.mark.parametrize("value", ["yesterday", "-3d", "2001-01-01", "0d", "99999999d", "2999-13-01"])
def test_issue_key_refuses_bad_or_past_expiry(free, value):
    with pytest.raises(CommandError, match="--expires"):
        call_command("issue_key", "--plan", "free", "--expires", value, stdout=StringIO())
    assert not APIKey.objects.exists()
    assert not Subscription.objects.exists()


def test_admin_sets_an_expiry_and_refuses_one_in_the_past(free):
    admin = UserFactory(is_staff=True, is_superuser=True)
    browser = Client()
    browser.force_login(admin)
    key, _ = APIKey.issue(SubscriptionFactory(plan=free))
    url = f"/admin/quota_plans/apikey/{key.pk}/change/"
    form = {"name": "ci", "subscription": key.subscription_id, "revoked_at_0": "", "revoked_at_1": ""}
    past = browser.post(url, {**form, "expires_at_0": "2001-01-01", "expires_at_1": "00:00:00"})
    assert past.status_code == 200
    assert "in the past" in past.content.decode()
    key.refresh_from_db()
    assert key.expires_at is None
    done = browser.post(url, {**form, "expires_at_0": "2999-01-01", "expires_at_1": "00:00:00"})
    assert done.status_code == 302
    key.refresh_from_db()
    assert key.expires_at.year == 2999
    assert "expires" in browser.get("/admin/quota_plans/apikey/").content.decode().lower()


def test_admin_issue_action_sets_an_optional_expiry_and_refuses_a_past_one(free):
    """The issue-key action's form takes issue_key's syntax; a past or unreadable expiry mints nothing."""
    browser = Client()
    browser.force_login(UserFactory(is_staff=True, is_superuser=True))
    sub = SubscriptionFactory(plan=free)
    step = {"action": "issue_api_key", "_selected_action": [sub.pk], "issue": "1"}
    for bad, message in (("2001-01-01", "in the past"), ("0d", "in the past"), ("soon", "use e.g. 30d")):
        page = browser.post("/admin/quota_plans/subscription/", {**step, "expires": bad})
        assert page.status_code == 200
        assert message in page.content.decode(), bad
        assert not re.search(r"qk_[A-Za-z0-9_-]{20,}", page.content.decode())
    assert not APIKey.objects.exists()
    page = browser.post("/admin/quota_plans/subscription/", {**step, "expires": "30d"})
    assert "They stop working at" in page.content.decode()
    key = APIKey.objects.get()
    assert abs(key.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    raw = re.search(r"qk_[A-Za-z0-9_-]{20,}", page.content.decode())[0]
    assert APIClient().get("/api/demo/ping", HTTP_X_API_KEY=raw).status_code == 200


def test_last_use_is_recorded_off_the_request_path_and_copied_by_the_flush(free, redis_client):
    sub = SubscriptionFactory(plan=free)
    used, raw = APIKey.issue(sub)
    idle, _ = APIKey.issue(sub)
    assert APIClient().get("/api/demo/ping", HTTP_X_API_KEY=raw).status_code == 200
    used.refresh_from_db()
    assert used.last_used_at is None  # the request wrote nothing to the database
    runtime = default_engine.runtime()
    runtime.tick()  # what the poller thread does every second
    report = flush_usage()
    assert report.keys_marked_used == 1
    used.refresh_from_db()
    idle.refresh_from_db()
    assert timezone.now() - used.last_used_at < timedelta(seconds=5)
    assert idle.last_used_at is None
    assert flush_usage().keys_marked_used == 0  # nothing newer
    assert re.match(r"\d+", str(redis_client.zscore(f"{runtime.prefix}:keys:last-used", str(used.pk))))


def test_the_flush_copies_every_note_then_forgets_those_older_than_a_day(free, redis_client):
    """A note a day old is still copied (the flush may have been down), then dropped from Redis; a recent
    note stays, so the sorted set holds the keys used lately rather than every key ever used."""
    sub = SubscriptionFactory(plan=free)
    recent, raw = APIKey.issue(sub)
    old, _ = APIKey.issue(sub)
    runtime = default_engine.runtime()
    two_days_ago = time.time() - 2 * 86_400
    # What a process's poller wrote two days ago, the flush not having run since.
    redis_client.zadd(last_used_key(runtime.prefix), {str(old.pk): two_days_ago})
    assert APIClient().get("/api/demo/ping", HTTP_X_API_KEY=raw).status_code == 200
    runtime.tick()
    assert flush_usage().keys_marked_used == 2
    old.refresh_from_db()
    assert abs(old.last_used_at.timestamp() - two_days_ago) < 1
    assert set(KeyUseSet(redis_client, runtime.prefix).last_used()) == {recent.pk}


def test_a_rolled_key_keeps_its_predecessors_expiry_unless_given_one(free):
    """A roll replaces a key, it does not extend its life: the successor of a time-limited key expires when the
    predecessor would have (the predecessor itself ends with the overlap), a key without an expiry is succeeded by
    one without, and an expiry given with the roll wins; one already past is refused, nothing rolled."""
    sub = SubscriptionFactory(plan=free)
    ends = timezone.now() + timedelta(days=30)
    limited, _ = APIKey.issue(sub, name="trial", expires_at=ends)
    successor, _ = limited.roll(timedelta(hours=1))
    assert successor.expires_at == ends
    assert APIKey.objects.get(pk=successor.pk).expires_at == ends
    assert limited.expires_at < ends  # the overlap, an hour from now

    permanent, _ = APIKey.issue(sub)
    assert permanent.roll(timedelta(hours=1))[0].expires_at is None

    later = timezone.now() + timedelta(days=90)
    given, _ = APIKey.issue(sub, expires_at=ends)
    assert given.roll(timedelta(0), expires_at=later)[0].expires_at == later

    kept, _ = APIKey.issue(sub, expires_at=ends)
    with pytest.raises(ValueError, match="in the past"):
        kept.roll(timedelta(hours=1), expires_at=timezone.now() - timedelta(seconds=1))
    kept.refresh_from_db()
    assert (kept.rolled_to, kept.expires_at) == (None, ends)
