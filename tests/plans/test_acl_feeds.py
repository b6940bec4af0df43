"""Allow and deny list feeds: fetched from a real HTTP server and from a file, parsed strictly, applied through
the rules snapshot's AccessList (a listed address is refused over HTTP), and a failing feed keeps its last good
list."""

from __future__ import annotations

import ipaddress
import json
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.test import APIClient

from config.celery import app
from plans.feeds.parse import parse_feed
from plans.feeds.refresh import refresh_feeds
from plans.models import ACLEntry, ACLFeed
from plans.rules import access_list
from plans.tasks import refresh_acl_feeds
from quotas.engine import default_engine
from tests.factories import EndpointLimitFactory, PlanFactory
from tests.plans.feed_server import serving
from tests.slow_dns import DOMAIN, slow_resolver

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

GOOD = b"# a threat feed\n203.0.113.0/24\n\n198.51.100.7   # one host\n2001:db8:bad::/48\n"


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/min")
    return plan


@pytest.fixture
def feeds_dir(tmp_path, set_quotas):
    """A folder served over HTTP on loopback and readable as feed files, both allowed by the feed settings."""
    folder = tmp_path / "feeds"
    folder.mkdir()
    set_quotas("ACL_FEEDS", ALLOW_HTTP=True, ALLOW_PRIVATE_ADDRESSES=True, FILE_DIRECTORIES=[str(folder)])
    return folder


@pytest.fixture
def server(feeds_dir):
    with serving(feeds_dir) as base_url:
        yield base_url


def ping(ip: str) -> tuple[int, dict]:
    response = APIClient().get("/api/demo/ping", REMOTE_ADDR=ip)
    body = json.loads(response.content) if response["Content-Type"] == "application/problem+json" else {}
    return response.status_code, body


def test_a_good_url_feed_denies_its_addresses_over_http(free, feeds_dir, server):
    """A deny feed served over HTTP is fetched, stored, and a request from a listed address gets the deny 403."""
    (feeds_dir / "drop.txt").write_bytes(GOOD)
    feed = ACLFeed.objects.create(name="drop", source=server + "drop.txt", action="deny")
    assert ping("203.0.113.9")[0] == 200  # not fetched yet: nothing applied

    report = refresh_feeds()

    assert report.changed == ["drop"]
    feed.refresh_from_db()
    assert feed.networks() == ["203.0.113.0/24", "198.51.100.7/32", "2001:db8:bad::/48"]
    assert (feed.entry_count, feed.consecutive_failures, feed.last_error) == (3, 0, "")
    status, body = ping("203.0.113.9")
    assert status == 403
    assert body["reason"] == "acl_denied"
    assert body["detail"].endswith("listed by the drop feed")
    assert ping("2001:db8:bad:1::5")[0] == 403
    assert ping("192.0.2.1")[0] == 200


def test_a_file_feed_allows_its_addresses_past_every_limit(free, feeds_dir):
    """An allow feed read from a local file lifts the limits of the addresses it lists, as an allow entry does."""
    EndpointLimitFactory(plan=free, name="tight", rates="1/min", algorithm="fixed_window")
    (feeds_dir / "monitors.txt").write_text("192.0.2.10\n")
    ACLFeed.objects.create(name="monitors", source=str(feeds_dir / "monitors.txt"), action="allow")
    refresh_feeds()
    assert {ping("192.0.2.10")[0] for _ in range(5)} == {200}
    assert [ping("192.0.2.11")[0] for _ in range(2)] == [200, 429]


def test_feed_entries_go_through_the_same_matcher_as_admin_entries(free, feeds_dir):
    """The snapshot's AccessList holds the feed's networks as IP rules next to the admin's entries: one compiled
    matcher, so the lookup figures of bench/acl.py apply to feeds too."""
    ACLEntry.objects.create(action="deny", cidr="10.0.0.0/8", reason="admin")
    (feeds_dir / "f.txt").write_text("203.0.113.0/24\n10.0.0.0/8\n")
    ACLFeed.objects.create(name="f", source=str(feeds_dir / "f.txt"), action="deny")
    refresh_feeds()
    acl = default_engine.runtime().rules.current().acl
    assert len(acl) == 3
    assert [r.id for r in acl if isinstance(r.id, str)] == ["feed:f", "feed:f"]
    assert {r.kind for r in acl} == {"ip"}
    hit = acl.match(ip=ipaddress.ip_address("10.1.2.3"), now=0.0)
    assert hit is not None
    assert hit.reason == "admin"
    assert acl.match(ip=ipaddress.ip_address("203.0.113.1"), now=0.0).id == "feed:f"


def test_a_malformed_feed_keeps_the_last_good_list(free, feeds_dir, server):
    """A line that is neither an IP nor a CIDR fails the whole feed: the last good list stays applied and the
    error, its time and the failure count are recorded on the feed."""
    path = feeds_dir / "drop.txt"
    path.write_bytes(GOOD)
    feed = ACLFeed.objects.create(name="drop", source=server + "drop.txt", action="deny")
    first = timezone.now() - timedelta(hours=2)
    refresh_feeds(now=first)
    path.write_text("203.0.113.0/24\n<html>Service Unavailable</html>\n")
    later = first + timedelta(hours=1)

    report = refresh_feeds(now=later)

    bad_line = "line 2: '<html>Service Unavailable</html>' is neither an IP address nor a CIDR network"
    assert report.failed == {"drop": bad_line}
    feed.refresh_from_db()
    assert feed.entry_count == 3
    assert feed.fetched_at == first
    assert (feed.last_error_at, feed.consecutive_failures) == (later, 1)
    assert feed.last_error.startswith("line 2:")
    assert ping("198.51.100.7")[0] == 403  # still denied by the last good list
    refresh_feeds(now=later + timedelta(hours=1))
    feed.refresh_from_db()
    assert feed.consecutive_failures == 2


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        ("missing", "the server answered HTTP 404"),
        ("large", "the feed is larger than QUOTAS['ACL_FEEDS']['MAX_BYTES'] (64 bytes)"),
        ("empty", "the feed is empty"),
        ("binary", "the feed is not UTF-8 text"),
        ("closed", "fetching failed: ConnectionRefusedError"),
    ],
)
def test_every_kind_of_failure_is_recorded_and_keeps_the_list(free, feeds_dir, server, set_quotas, setup, error):
    """HTTP errors, a feed over the size cap, an empty or binary answer and a refused connection each fail the
    fetch with a message saying which, and the last good list stays in force."""
    path = feeds_dir / "drop.txt"
    path.write_bytes(GOOD)
    feed = ACLFeed.objects.create(name="drop", source=server + "drop.txt", action="deny")
    refresh_feeds()
    if setup == "missing":
        path.unlink()
    elif setup == "large":
        set_quotas("ACL_FEEDS", MAX_BYTES=64)
        path.write_text("".join(f"192.0.2.{i}\n" for i in range(30)))
    elif setup == "empty":
        path.write_bytes(b"\n")
    elif setup == "binary":
        path.write_bytes(b"\xff\xfe10.0.0.1\n")
    elif setup == "closed":
        with serving(feeds_dir) as other:
            pass  # a port nothing listens on any more
        ACLFeed.objects.filter(pk=feed.pk).update(source=other + "drop.txt")
    report = refresh_feeds()
    assert report.failed["drop"].startswith(error), report.failed
    feed.refresh_from_db()
    assert feed.entry_count == 3
    assert feed.consecutive_failures == 1
    assert ping("203.0.113.9")[0] == 403


def test_a_private_address_is_refused_unless_the_setting_allows_it(free, feeds_dir, server, set_quotas):
    """The webhooks' SSRF guard: a feed URL on loopback is refused (on save and on fetch) by default."""
    (feeds_dir / "drop.txt").write_bytes(GOOD)
    set_quotas("ACL_FEEDS", ALLOW_PRIVATE_ADDRESSES=False)
    feed = ACLFeed(name="drop", source=server + "drop.txt", action="deny")
    with pytest.raises(ValidationError) as info:
        feed.full_clean()
    assert "resolves to an internal address (127.0.0.1)" in info.value.message_dict["source"][0]
    feed.save()
    assert "resolves to an internal address" in refresh_feeds().failed["drop"]
    set_quotas("ACL_FEEDS", ALLOW_HTTP=False, ALLOW_PRIVATE_ADDRESSES=True)
    assert refresh_feeds().failed["drop"] == "not fetched: only https:// URLs are allowed"


@pytest.mark.slow
def test_a_slow_resolver_is_waited_for_only_timeout_seconds(free, feeds_dir, server, set_quotas, monkeypatch):
    """The feed's host resolves through a DNS server answering after 4 s; with TIMEOUT=1 saving the feed is
    refused with a clear message, and a refresh records the timeout and keeps the last good list, each after
    about a second."""
    (feeds_dir / "drop.txt").write_bytes(GOOD)
    set_quotas("ACL_FEEDS", TIMEOUT=1)
    url = server.replace("127.0.0.1", "feeds" + DOMAIN) + "drop.txt"
    feed = ACLFeed(name="drop", source=url, action="deny", entries="192.0.2.0/24", entry_count=1)
    with slow_resolver(monkeypatch, delay=4.0):
        with pytest.raises(ValidationError) as info:
            feed.full_clean()
        feed.save()
        failed = refresh_feeds().failed["drop"]
    assert info.value.message_dict["source"] == [
        f"not checked: feeds{DOMAIN} did not resolve within 1 s; try again later"
    ]
    assert failed == f"fetching failed: TimeoutError: feeds{DOMAIN} did not resolve within 1 s"
    feed.refresh_from_db()
    assert (feed.entries, feed.consecutive_failures) == ("192.0.2.0/24", 1)


def test_a_file_outside_the_allowed_directories_is_not_read(feeds_dir, tmp_path):
    """A feed's file must lie inside FILE_DIRECTORIES (a symbolic link out of it does not count)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("10.0.0.1\n")
    (feeds_dir / "link.txt").symlink_to(secret)
    for source in (str(secret), str(feeds_dir / "link.txt"), "relative/path.txt"):
        with pytest.raises(ValidationError) as info:
            ACLFeed(name="x", source=source, action="deny").full_clean()
        assert "source" in info.value.message_dict
    ACLFeed.objects.create(name="x", source=str(secret), action="deny")
    assert "is not inside a directory of QUOTAS['ACL_FEEDS']['FILE_DIRECTORIES']" in refresh_feeds().failed["x"]


def test_a_disabled_feed_is_neither_fetched_nor_applied(free, feeds_dir):
    """Turning a feed off in the admin lifts its list at once (the save reloads the rules)."""
    (feeds_dir / "f.txt").write_text("203.0.113.0/24\n")
    feed = ACLFeed.objects.create(name="f", source=str(feeds_dir / "f.txt"), action="deny")
    refresh_feeds()
    assert ping("203.0.113.1")[0] == 403
    feed.refresh_from_db()
    feed.enabled = False
    feed.save()
    assert ping("203.0.113.1")[0] == 200
    report = refresh_feeds()
    assert (report.changed, report.unchanged, report.failed) == ([], [], {})


def test_an_unchanged_list_does_not_reload_the_rules(free, feeds_dir):
    """Fetching the same list again records the fetch and leaves every process's rules snapshot alone."""
    (feeds_dir / "f.txt").write_text("203.0.113.0/24\n")
    ACLFeed.objects.create(name="f", source=str(feeds_dir / "f.txt"), action="deny")
    refresh_feeds()
    rules = default_engine.runtime().rules
    snapshot = rules.current()
    report = refresh_feeds()
    assert (report.changed, report.unchanged) == ([], ["f"])
    assert rules.current() is snapshot


def test_the_celery_task_is_scheduled_every_interval_and_refreshes(free, feeds_dir, settings):
    """Beat runs plans.refresh_acl_feeds every QUOTAS['ACL_FEEDS']['INTERVAL']; the task is a thin shell that
    refreshes and reports by feed name."""
    entry = settings.CELERY_BEAT_SCHEDULE["acl-feeds-refresh"]
    assert entry["task"] == "plans.refresh_acl_feeds"
    assert entry["schedule"] == settings.QUOTAS["ACL_FEEDS"]["INTERVAL"] == 3600.0
    assert "plans.refresh_acl_feeds" in app.tasks
    (feeds_dir / "f.txt").write_text("203.0.113.0/24\n")
    ACLFeed.objects.create(name="f", source=str(feeds_dir / "f.txt"), action="deny")
    assert refresh_acl_feeds.run() == {"changed": ["f"], "unchanged": [], "failed": {}}


@pytest.mark.parametrize(
    ("text", "action", "message"),
    [
        ("10.0.0.1\nexample.com\n", "deny", "line 2: 'example.com' is neither an IP address nor a CIDR network"),
        ("10.0.0.0/33\n", "deny", "line 1: '10.0.0.0/33' is neither"),
        ("fe80::1%eth0\n", "deny", "line 1: 'fe80::1%eth0' is neither"),
        ("10.0.0.1 10.0.0.2\n", "deny", "line 1: '10.0.0.1 10.0.0.2' is neither"),
        ("0.0.0.0/0\n", "allow", "line 1: allowing 0.0.0.0/0 would lift every limit for every client"),
        ("::/1\n", "allow", "line 1: allowing ::/1 would lift every limit for every client"),
        ("0.0.0.0/1\n128.0.0.0/1\n", "allow", "line 1: allowing 0.0.0.0/1 would lift every limit for every client"),
        (
            "0.0.0.0/2\n64.0.0.0/2\n",
            "allow",
            "allowing these networks would lift every limit for every client: together 0.0.0.0/1 (50% of the IPv4",
        ),
        ("::/3\n2000::/3\n4000::/3\n6000::/3\n", "allow", "allowing these networks would lift every limit for"),
        ("", "deny", "the feed is empty"),
    ],
)
def test_parsing_is_strict(text, action, message):
    """Anything but an address, a network, a comment or a blank line fails the whole feed, naming the line."""
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse_feed(text.encode(), action)


def test_parsing_normalises_and_drops_duplicates():
    """Host bits are cleared, mapped IPv4 becomes IPv4, comments and blanks go, duplicates count once."""
    text = "\ufeff# header\n192.0.2.77/24\n::ffff:192.0.2.1\n\n192.0.2.0/24 # again\n0.0.0.0/0\n"
    assert parse_feed(text.encode("utf-8"), "deny") == ["192.0.2.0/24", "192.0.2.1/32", "0.0.0.0/0"]
    assert parse_feed(b"# only comments\n", "deny") == []


def test_a_deny_feed_listing_everyone_cannot_become_an_allow_feed(feeds_dir):
    """Switching the action of a feed whose list holds 0.0.0.0/0 to allow is refused on the action field."""
    (feeds_dir / "all.txt").write_text("0.0.0.0/0\n")
    feed = ACLFeed.objects.create(name="all", source=str(feeds_dir / "all.txt"), action="deny")
    refresh_feeds()
    feed.refresh_from_db()
    feed.action = "allow"
    with pytest.raises(ValidationError) as info:
        feed.full_clean()
    assert info.value.message_dict == {
        "action": [
            "This feed's list covers 0.0.0.0/0 (100% of the IPv4 addresses): allowing it would lift every limit for "
            "every client."
        ]
    }


def test_the_snapshot_never_applies_an_allow_of_everyone_written_around_validation(db):
    """A stored allow of 0.0.0.0/0 (a row written past the refresh and the admin) is left out of the rules, as is
    a stored line that does not parse; the feed's other networks apply."""
    stored = "0.0.0.0/0\nbogus\n192.0.2.0/24"
    ACLFeed.objects.create(name="f", source="/nowhere.txt", action="allow", entries=stored, fetched_at=timezone.now())
    acl = access_list()
    assert [str(rule.value) for rule in acl] == ["192.0.2.0/24"]


def test_the_snapshot_never_applies_an_allow_list_covering_every_address_in_parts(db):
    """Stored allow lists written past the refresh and the admin: halves of each family are left out (each covers
    half), two quarters together are left out whole with the list's other networks (counted by addresses
    covered, not prefix length); a list under half of each family applies."""
    halves = "0.0.0.0/1\n128.0.0.0/1\n::/1\n8000::/1"
    ACLFeed.objects.create(name="v4", source="/nowhere.txt", action="allow", entries=halves, fetched_at=timezone.now())
    ACLFeed.objects.create(
        name="v6", source="/nowhere.txt", action="allow", entries="::/1\n8000::/1", fetched_at=timezone.now()
    )
    fine = "0.0.0.0/2\n2001:db8::/32"
    ACLFeed.objects.create(name="fine", source="/nowhere.txt", action="allow", entries=fine, fetched_at=timezone.now())
    ACLFeed.objects.create(
        name="quarters", source="/nowhere.txt", action="allow", entries="0.0.0.0/2\n64.0.0.0/2\n192.0.2.0/24",
        fetched_at=timezone.now(),
    )  # fmt: skip
    ACLFeed.objects.create(name="deny", source="/nowhere.txt", action="deny", entries=halves, fetched_at=timezone.now())
    acl = access_list()
    assert sorted((rule.action, str(rule.value)) for rule in acl if rule.action == "allow") == [
        ("allow", "0.0.0.0/2"),
        ("allow", "2001:db8::/32"),
    ]
    assert len([rule for rule in acl if rule.action == "deny"]) == 4  # a deny list may cover everyone


def _allow_feed(feeds_dir, name: str, text: str, entries: str = "") -> ACLFeed:
    (feeds_dir / f"{name}.txt").write_text(text)
    fetched = timezone.now() if entries else None
    return ACLFeed.objects.create(name=name, source=str(feeds_dir / f"{name}.txt"), action="allow",
                                  entries=entries, entry_count=len(entries.split()), fetched_at=fetched)  # fmt: skip


def test_an_allow_feed_of_every_public_ipv6_address_is_refused(feeds_dir):
    """``2000::/3`` is an eighth of the IPv6 space (under the old half-a-family rule) but every public IPv6
    address: the refresh is refused, naming the share and the ceiling, and the last good list is kept."""
    feed = _allow_feed(feeds_dir, "v6", "2001:4860:4801::/48\n2000::/3\n", entries="2001:4860:4801::/48")
    report = refresh_feeds()
    assert report.failed == {
        "v6": "refused: the allow lists together would cover 100 % of the public IPv6 addresses (global unicast, "
        "2000::/3), over the ceiling of 0.00153 % (QUOTAS['ACL_FEEDS']['MAX_ALLOW_SHARE'])"
    }
    feed.refresh_from_db()
    assert (feed.entries, feed.consecutive_failures, feed.last_error) == ("2001:4860:4801::/48", 1, report.failed["v6"])


def test_two_allow_feeds_under_the_ceiling_alone_are_refused_together(feeds_dir, set_quotas):
    """With the ceiling at the old rule's half, two feeds of three eighths of IPv4 each: the first refreshed is
    kept, the second (together three quarters) is refused and keeps its last list; the snapshot applies the
    first feed's and the second's old networks only."""
    set_quotas("ACL_FEEDS", MAX_ALLOW_SHARE=0.5)
    _allow_feed(feeds_dir, "a", "0.0.0.0/2\n64.0.0.0/3\n")
    _allow_feed(feeds_dir, "b", "128.0.0.0/2\n192.0.0.0/3\n", entries="1.2.3.0/24")
    report = refresh_feeds()
    assert report.changed == ["a"]
    assert report.failed["b"].startswith("refused: the allow lists together would cover 74.2 %")
    assert report.failed["b"].endswith(
        " % of the public IPv4 addresses, over the ceiling of 50 % (QUOTAS['ACL_FEEDS']['MAX_ALLOW_SHARE'])"
    )
    assert ACLFeed.objects.get(name="b").entries == "1.2.3.0/24"
    assert sorted(str(rule.value) for rule in access_list()) == ["0.0.0.0/2", "1.2.3.0/24", "64.0.0.0/3"]


def test_usual_allow_lists_stay_under_the_default_ceiling_and_private_networks_count_for_nothing(feeds_dir):
    """Crawlers' and a partner's ranges, the admin's allow of an office network and of the platform's own
    private networks (whole 10/8 and fc00::/7: no public address) are accepted together; one /16 more passes the
    default ceiling (65,536 IPv4 addresses) and is refused, on a feed's refresh and on the admin's entry."""
    ACLEntry.objects.create(action="allow", cidr="8.8.8.0/24", reason="office")
    ACLEntry.objects.create(action="allow", cidr="10.0.0.0/8", reason="our services")
    ACLEntry.objects.create(action="allow", cidr="fc00::/7", reason="our services")
    _allow_feed(feeds_dir, "crawlers", "66.249.64.0/19\n2001:4860:4801::/48\n")
    _allow_feed(feeds_dir, "partner", "1.2.3.0/24\n")
    assert refresh_feeds().changed == ["crawlers", "partner"]
    _allow_feed(feeds_dir, "wide", "9.0.0.0/16\n")
    assert "0.00173 % of the public IPv4 addresses, over the ceiling" in refresh_feeds().failed["wide"]
