"""A failing feed says so where operators look: its admin page, ``manage.py quota_doctor``, the system checks and
/metrics; and the feeds' admin does no more than a staff user's permissions say."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.admin import site as admin_site
from django.contrib.auth.models import Permission
from django.core import checks
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from plans.feeds.refresh import refresh_feeds
from plans.models import ACLFeed
from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory

pytestmark = pytest.mark.django_db

ADMIN = "/admin/quota_plans/aclfeed/"


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/min")  # else quota_plans.W001 warns
    return plan


@pytest.fixture
def feed_file(tmp_path, set_quotas):
    set_quotas("ACL_FEEDS", FILE_DIRECTORIES=[str(tmp_path)])
    path = tmp_path / "drop.txt"
    path.write_text("203.0.113.0/24\n198.51.100.7\n")
    return path


@pytest.fixture
def failing(feed_file):
    """A deny feed fetched once (two networks) two hours ago, then broken an hour ago."""
    feed = ACLFeed.objects.create(name="drop", source=str(feed_file), action="deny")
    now = timezone.now()
    refresh_feeds(now=now - timedelta(hours=2))
    feed_file.write_text("203.0.113.0/24\nnot-an-address\n")
    refresh_feeds(now=now - timedelta(hours=1))
    feed.refresh_from_db()
    return feed


def staff_with(*codenames: str) -> Client:
    user = UserFactory(is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    browser = Client()
    browser.force_login(user)
    return browser


def test_the_admin_shows_a_failing_feed_and_the_list_it_keeps(failing):
    """The list and the feed's page show the error, and that the last good list is still applied."""
    browser = staff_with("view_aclfeed")
    listing = browser.get(ADMIN).content.decode()
    assert "Failing (1\xa0hour ago): line 2: &#x27;not-an-address&#x27; is neither an IP address" in listing
    assert "last good list of 2 networks still applied" in listing
    page = browser.get(f"{ADMIN}{failing.pk}/change/").content.decode()
    assert "203.0.113.0/24<br>198.51.100.7/32" in page  # the last good list, one network a line
    assert "line 2: &#x27;not-an-address&#x27;" in page


def test_quota_doctor_warns_of_a_failing_feed(free, failing, runtime):
    """The doctor reports the feed's error and that its last good list is kept, as a warning."""
    out = StringIO()
    call_command("quota_doctor", "--json", stdout=out)
    report = json.loads(out.getvalue())
    found = [c for c in report["checks"] if c["name"] == "django quota_plans.W012"]
    assert [c["status"] for c in found] == ["warning"]
    assert "ACL feed 'drop'" in found[0]["detail"]
    assert "failed 1 time(s) in a row" in found[0]["detail"]
    assert "'not-an-address' is neither an IP address nor a CIDR network" in found[0]["detail"]
    assert "its last good list (2 networks, fetched 2 hours ago) is still applied" in found[0]["detail"]
    assert report["status"] == "warning"


def test_the_checks_say_nothing_of_healthy_feeds_and_warn_of_unfetched_ones(free, feed_file, settings):
    """A feed never fetched is W013; once fetched, nothing; with no beat entry for the task, W011."""
    ACLFeed.objects.create(name="drop", source=str(feed_file), action="deny")

    def ids() -> list[str]:
        return sorted(m.id for m in checks.run_checks(databases=["default"]) if m.id.startswith("quota_plans"))

    assert ids() == ["quota_plans.W013"]
    refresh_feeds()
    assert ids() == []
    settings.CELERY_BEAT_SCHEDULE = {}
    assert ids() == ["quota_plans.W011"]


def test_bad_feed_settings_are_start_up_errors(set_quotas):
    """Each setting is validated with its own id and a hint."""
    set_quotas("ACL_FEEDS", FILE_DIRECTORIES=["feeds"], TIMEOUT=0, ALLOW_HTTP="yes", MAX_BYTE=1)
    found = {m.id: m for m in checks.run_checks() if m.id.startswith("quota_plans")}
    assert set(found) == {"quota_plans.E011", "quota_plans.E013", "quota_plans.E014", "quota_plans.W010"}
    assert "must list absolute directory paths; 'feeds' is not one" in found["quota_plans.E014"].msg
    assert "Did you mean 'MAX_BYTES'?" in found["quota_plans.W010"].hint


@pytest.mark.urls("tests.urls")
def test_metrics_show_each_feeds_age_failures_and_entries(failing, client, set_quotas):
    """Per enabled feed: seconds since its last good fetch, failures in a row, networks in force."""
    set_quotas("METRICS", ALLOW_LOOPBACK=True)
    ACLFeed.objects.create(name="never", source=failing.source, action="deny")

    def scrape() -> dict[str, float]:
        text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
        found = re.findall(r'^(quota_acl_feed_\w+)\{feed="([^"]+)"\} (\S+)$', text, re.M)
        return {f"{name}/{feed}": float(value) for name, feed, value in found}

    series = scrape()
    assert 2 * 3600 <= series["quota_acl_feed_age_seconds/drop"] < 3 * 3600
    assert series["quota_acl_feed_failures/drop"] == 1
    assert series["quota_acl_feed_entries/drop"] == 2
    assert series["quota_acl_feed_age_seconds/never"] == float("inf")
    assert series["quota_acl_feed_entries/never"] == 0
    ACLFeed.objects.filter(pk=failing.pk).update(enabled=False)  # a disabled feed is not reported
    assert "quota_acl_feed_failures/drop" not in scrape()


def test_view_only_staff_cannot_refresh_or_edit_feeds(failing, feed_file):
    """A user who may only view feeds is offered no action, and posting one (or an edit) changes nothing."""
    viewer = staff_with("view_aclfeed")
    page = viewer.get(ADMIN)
    assert page.status_code == 200
    assert "refresh_now" not in page.content.decode()
    feed_file.write_text("192.0.2.1\n")
    response = viewer.post(ADMIN, {"action": "refresh_now", "_selected_action": [failing.pk]})
    assert response.status_code == 200  # the changelist again: a view-only user has no action to choose
    failing.refresh_from_db()
    assert (failing.entry_count, failing.consecutive_failures) == (2, 1)  # nothing was fetched
    edit = viewer.post(f"{ADMIN}{failing.pk}/change/", {"name": "drop", "source": str(feed_file), "action": "allow"})
    assert edit.status_code == 403
    assert ACLFeed.objects.get(pk=failing.pk).action == "deny"
    assert viewer.post(f"{ADMIN}add/", {"name": "x", "source": str(feed_file), "action": "deny"}).status_code == 403
    assert not ACLFeed.objects.filter(name="x").exists()


def test_the_refresh_action_checks_its_permission_itself(failing, feed_file, rf):
    """Called without Django's action filter in front (a direct call), the action refuses a view-only user."""
    request = rf.post(ADMIN, {"action": "refresh_now"})
    request.user = UserFactory(is_staff=True)
    request.user.user_permissions.set(Permission.objects.filter(codename="view_aclfeed"))
    feed_file.write_text("192.0.2.1\n")
    with pytest.raises(PermissionDenied):
        admin_site.get_model_admin(ACLFeed).refresh_now(request, ACLFeed.objects.all())
    failing.refresh_from_db()
    assert failing.consecutive_failures == 1
    assert failing.entry_count == 2


def test_staff_who_may_change_feeds_refresh_them_now(failing, feed_file):
    """With change permission, 'Refresh selected feeds now' fetches at once and says how it went."""
    editor = staff_with("view_aclfeed", "change_aclfeed")
    assert "refresh_now" in editor.get(ADMIN).content.decode()
    feed_file.write_text("192.0.2.1\n")
    response = editor.post(ADMIN, {"action": "refresh_now", "_selected_action": [failing.pk]}, follow=True)
    assert "Refreshed 1 feed(s) (1 changed)." in response.content.decode()
    failing.refresh_from_db()
    assert (failing.networks(), failing.consecutive_failures) == (["192.0.2.1/32"], 0)


def test_the_admin_refuses_a_source_the_settings_do_not_allow(feed_file, tmp_path):
    """Saving a feed whose source may not be read shows a validation message on the field, not a 500."""
    editor = staff_with("view_aclfeed", "add_aclfeed")
    response = editor.post(f"{ADMIN}add/", {"name": "x", "source": "/etc/passwd", "action": "deny", "enabled": "on"})
    assert response.status_code == 200
    assert "is not inside a directory of QUOTAS[&#x27;ACL_FEEDS&#x27;][&#x27;FILE_DIRECTORIES&#x27;]" in (
        response.content.decode()
    )
    response = editor.post(f"{ADMIN}add/", {"name": "x", "source": "https://10.0.0.1/x", "action": "deny"})
    assert "resolves to an internal address (10.0.0.1)" in response.content.decode()
    assert not ACLFeed.objects.exists()
    ok = editor.post(f"{ADMIN}add/", {"name": "x", "source": str(feed_file), "action": "deny", "enabled": "on"})
    assert ok.status_code == 302
    assert ACLFeed.objects.get().name == "x"


#: Two halves of each address family: together every address, though no line is a /0.
HALVES = "0.0.0.0/1\n128.0.0.0/1\n::/1\n8000::/1\n"


def test_the_admin_refuses_an_allow_feed_whose_halves_cover_every_address(free, feed_file):
    """An allow feed whose lines together cover every address fails its refresh (nothing applied), and a deny feed
    holding them cannot be switched to allow in its change form: counted by addresses, not by prefix length."""
    editor = staff_with("view_aclfeed", "change_aclfeed")
    feed_file.write_text(HALVES)
    allow = ACLFeed.objects.create(name="halves", source=str(feed_file), action="allow")
    page = editor.post(ADMIN, {"action": "refresh_now", "_selected_action": [allow.pk]}, follow=True)
    assert "Feed halves failed: line 1: allowing 0.0.0.0/1 would lift every limit for every client" in (
        page.content.decode()
    )
    allow.refresh_from_db()
    assert (allow.entry_count, allow.consecutive_failures) == (0, 1)
    deny = ACLFeed.objects.create(name="deny-halves", source=str(feed_file), action="deny")
    refresh_feeds([deny])
    deny.refresh_from_db()
    assert deny.entry_count == 4
    fields = {"name": "deny-halves", "source": str(feed_file), "action": "allow", "enabled": "on"}
    edit = editor.post(f"{ADMIN}{deny.pk}/change/", fields)
    assert edit.status_code == 200  # the form again, with the error
    assert "This feed&#x27;s list covers 0.0.0.0/0 (100% of the IPv4 addresses): allowing it would lift every " \
        "limit for every client." in edit.content.decode()  # fmt: skip
    assert ACLFeed.objects.get(pk=deny.pk).action == "deny"
