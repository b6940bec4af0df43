"""ACLEntry: model validation with clear messages, and its admin pages."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from plans.models import ACLEntry, ACLFeed, APIKey
from tests.factories import SubscriptionFactory, UserFactory

pytestmark = pytest.mark.django_db


def errors_of(entry: ACLEntry) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        entry.full_clean()
    return info.value.message_dict


@pytest.fixture
def admin_client() -> APIClient:
    client = APIClient()
    client.force_login(UserFactory(username="admin", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({}, NON_FIELD_ERRORS, "Choose what this entry matches"),
        ({"cidr": "10.0.0.0/8", "user": True}, NON_FIELD_ERRORS, "this one sets User and IP address or network"),
        ({"cidr": "10.0.0.300"}, "cidr", "'10.0.0.300' is not an IPv4 or IPv6 address or network"),
        ({"cidr": "2001:db8::/129"}, "cidr", "is not an IPv4 or IPv6 address or network"),
        ({"cidr": "fe80::1%eth0"}, "cidr", "is not an IPv4 or IPv6 address or network"),
        ({"cidr": "0.0.0.0/0", "action": "allow"}, "cidr", "would lift every limit for every client"),
        ({"cidr": "::/0", "action": "allow"}, "cidr", "would lift every limit for every client"),
        ({"cidr": "128.0.0.0/1", "action": "allow"}, "cidr", "would lift every limit for every client"),
        ({"cidr": "10.0.0.1", "expires_at": -60}, "expires_at", "The expiry must be in the future"),
        ({"cidr": "10.0.0.1", "reason": ""}, "reason", "This field cannot be blank"),
        ({"cidr": "10.0.0.1", "reason": "   "}, "reason", "Say why"),
        ({"cidr": "10.0.0.1", "action": "block"}, "action", "not a valid choice"),
    ],
)
def test_invalid_entries_are_refused_with_a_clear_message(fields, field, message):
    """Each mistake is reported on the field it concerns, in words an operator can act on."""
    if fields.pop("user", False):
        fields["user"] = UserFactory()
    if "expires_at" in fields:
        fields["expires_at"] = timezone.now() + timedelta(seconds=fields["expires_at"])
    entry = ACLEntry(**{"action": "deny", "reason": "abuse", **fields})
    errors = errors_of(entry)
    assert field in errors, errors
    assert message in " ".join(errors[field])


def test_two_targets_are_reported_once():
    """Several targets give one clear message, not also the constraint's generic one."""
    sub = SubscriptionFactory()
    key, _ = APIKey.issue(sub)
    errors = errors_of(ACLEntry(action="deny", api_key=key, subscription=sub, reason="x"))
    assert errors == {
        NON_FIELD_ERRORS: [
            "An entry matches exactly one of API key, user, subscription or IP/CIDR; "
            "this one sets API key and Subscription. Clear all but one."
        ]
    }


def test_cidr_is_normalised_and_a_deny_for_everyone_is_allowed():
    """Host bits are cleared, IPv6 is lower-cased, mapped IPv4 becomes IPv4; deny 0.0.0.0/0 is fine."""
    for given, stored in [
        (" 192.0.2.77/24 ", "192.0.2.0/24"),
        ("2001:DB8::1", "2001:db8::1/128"),
        ("::ffff:192.0.2.1", "192.0.2.1/32"),
        ("0.0.0.0/0", "0.0.0.0/0"),
    ]:
        entry = ACLEntry(action="deny", cidr=given, reason="abuse")
        entry.full_clean()
        assert entry.cidr == stored
        assert entry.kind == "ip"


def test_an_expired_entry_can_still_be_edited():
    """The future-expiry rule is for new entries; ending an entry early by editing it is allowed."""
    entry = ACLEntry.objects.create(action="deny", cidr="192.0.2.1", reason="abuse")
    entry.expires_at = timezone.now() - timedelta(minutes=1)
    entry.full_clean()
    assert entry.is_expired


def test_each_kind_and_its_label():
    sub = SubscriptionFactory(name="ACME")
    key, _ = APIKey.issue(sub, name="ci")
    user = UserFactory(username="mallory")
    cases = [
        (ACLEntry(action="deny", api_key=key, reason="x"), "key"),
        (ACLEntry(action="deny", user=user, reason="x"), "user"),
        (ACLEntry(action="allow", subscription=sub, scope="search", reason="x"), "subscription"),
        (ACLEntry(action="deny", cidr="192.0.2.0/24", reason="x"), "ip"),
    ]
    for entry, kind in cases:
        entry.full_clean()
        assert entry.kind == kind
    assert str(cases[1][0]) == "deny user mallory"
    assert str(cases[2][0]) == f"allow subscription {sub} on search"
    assert str(cases[3][0]) == "deny ip address or network 192.0.2.0/24"


def test_database_refuses_an_entry_with_no_target():
    """The check constraint backs model validation for code that skips full_clean()."""
    with pytest.raises(IntegrityError), transaction.atomic():
        ACLEntry.objects.create(action="deny", reason="x")


def test_admin_add_shows_the_message_for_a_bad_cidr(admin_client):
    """A bad CIDR re-displays the form with the message; nothing is saved."""
    data = {"action": "deny", "reason": "scraper", "cidr": "203.0.113.0/33", "scope": "", "expires_at_0": "",
            "expires_at_1": "", "api_key": "", "user": "", "subscription": ""}  # fmt: skip
    response = admin_client.post("/admin/quota_plans/aclentry/add/", data)
    assert response.status_code == 200
    assert "&#x27;203.0.113.0/33&#x27; is not an IPv4 or IPv6 address or network" in response.content.decode()
    assert not ACLEntry.objects.exists()


def test_admin_add_shows_the_message_for_two_targets(admin_client):
    data = {"action": "deny", "reason": "scraper", "cidr": "203.0.113.0/24", "scope": "", "expires_at_0": "",
            "expires_at_1": "", "api_key": "", "user": str(UserFactory().pk), "subscription": ""}  # fmt: skip
    response = admin_client.post("/admin/quota_plans/aclentry/add/", data)
    assert response.status_code == 200
    assert "matches exactly one of API key, user, subscription or IP/CIDR" in response.content.decode()
    assert not ACLEntry.objects.exists()


def test_admin_add_saves_a_normalised_entry_and_its_author(admin_client):
    data = {"action": "deny", "reason": "scraper", "cidr": "203.0.113.9/24", "scope": "search",
            "expires_at_0": "", "expires_at_1": "", "api_key": "", "user": "", "subscription": ""}  # fmt: skip
    response = admin_client.post("/admin/quota_plans/aclentry/add/", data)
    assert response.status_code == 302
    entry = ACLEntry.objects.get()
    assert (entry.cidr, entry.scope, entry.created_by.username) == ("203.0.113.0/24", "search", "admin")


def test_admin_list_filters_and_search(admin_client):
    """The list filters by action, kind and active/expired, and searches reasons and CIDRs."""
    sub = SubscriptionFactory()
    ACLEntry.objects.create(action="deny", cidr="198.51.100.0/24", reason="credential stuffing")
    ACLEntry.objects.create(action="allow", subscription=sub, reason="internal monitoring")
    old = ACLEntry.objects.create(action="deny", user=UserFactory(username="mallory"), reason="spam wave")
    ACLEntry.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(days=1))

    def listed(query: str) -> list[str]:
        response = admin_client.get(f"/admin/quota_plans/aclentry/{query}")
        assert response.status_code == 200
        return sorted(e.reason for e in response.context["cl"].result_list)

    assert listed("") == ["credential stuffing", "internal monitoring", "spam wave"]
    assert listed("?action__exact=allow") == ["internal monitoring"]
    assert listed("?kind=ip") == ["credential stuffing"]
    assert listed("?kind=user") == ["spam wave"]
    assert listed("?kind=subscription") == ["internal monitoring"]
    assert listed("?kind=key") == []
    assert listed("?status=active") == ["credential stuffing", "internal monitoring"]
    assert listed("?status=expired") == ["spam wave"]
    assert listed("?q=stuffing") == ["credential stuffing"]
    assert listed("?q=198.51.100") == ["credential stuffing"]
    page = admin_client.get("/admin/quota_plans/aclentry/").content.decode()
    assert "198.51.100.0/24" in page
    assert "mallory" in page


def test_admin_change_page_renders(admin_client):
    entry = ACLEntry.objects.create(action="deny", cidr="192.0.2.1/32", reason="abuse")
    assert admin_client.get(f"/admin/quota_plans/aclentry/{entry.pk}/change/").status_code == 200


def test_admin_refuses_an_allow_entry_passing_the_ceiling_with_the_feeds(admin_client):
    """A /16 allowed by a feed and a /17 by an entry are each within QUOTAS['ACL_FEEDS']['MAX_ALLOW_SHARE']
    (65,536 IPv4 addresses by default) but not together: the admin's entry is refused with the share; a deny of
    the same is saved."""
    ACLFeed.objects.create(name="partner", source="/nowhere.txt", action="allow", entries="9.0.0.0/16",
                           fetched_at=timezone.now())  # fmt: skip
    data = {"action": "allow", "reason": "partner", "cidr": "9.1.0.0/17", "scope": "", "expires_at_0": "",
            "expires_at_1": "", "api_key": "", "user": "", "subscription": ""}  # fmt: skip
    response = admin_client.post("/admin/quota_plans/aclentry/add/", data)
    assert response.status_code == 200
    assert (
        "Allowing 9.1.0.0/17 is refused: the allow lists together would cover 0.00229 % of the public IPv4 "
        "addresses, over the ceiling of 0.00153 % (QUOTAS[&#x27;ACL_FEEDS&#x27;][&#x27;MAX_ALLOW_SHARE&#x27;])"
    ) in response.content.decode()
    assert not ACLEntry.objects.exists()
    response = admin_client.post("/admin/quota_plans/aclentry/add/", {**data, "action": "deny"})
    assert response.status_code == 302


def test_admin_refuses_switching_a_feed_to_allow_past_the_ceiling(admin_client, tmp_path, set_quotas):
    """A deny feed listing a /8 (a 256th of IPv4: under the old half rule) cannot become an allow feed; one
    listing a /24 can."""
    set_quotas("ACL_FEEDS", FILE_DIRECTORIES=[str(tmp_path)])
    source = str(tmp_path / "big.txt")
    feed = ACLFeed.objects.create(name="big", source=source, action="deny", entries="9.0.0.0/8",
                                  fetched_at=timezone.now())  # fmt: skip
    data = {"name": "big", "action": "allow", "source": source, "enabled": "on"}
    response = admin_client.post(f"/admin/quota_plans/aclfeed/{feed.pk}/change/", data)
    assert response.status_code == 200
    assert "This feed&#x27;s list is refused: the allow lists together would cover 0.391 %" in response.content.decode()
    feed.refresh_from_db()
    assert feed.action == "deny"
    ACLFeed.objects.filter(pk=feed.pk).update(entries="9.0.0.0/24")
    assert admin_client.post(f"/admin/quota_plans/aclfeed/{feed.pk}/change/", data).status_code == 302
