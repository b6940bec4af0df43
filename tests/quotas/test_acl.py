"""Access lists: the compiled AccessList, and its loading and hot reload from the database."""

from __future__ import annotations

import ipaddress
from datetime import timedelta

import pytest
from django.utils import timezone

from plans.models import ACLEntry, APIKey
from plans.rules import PlansRulesBackend
from quotas.engine import default_engine
from quotas.formats.acl import AccessList, ACLRule, parse_network
from quotas.rules.snapshot import RuleSet
from tests.acl_samples import build_sample
from tests.factories import SubscriptionFactory, UserFactory

NOW = 1_800_000_000.0


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def rule(id: int, action: str, kind: str, value: object, **kwargs: object) -> ACLRule:
    return ACLRule(id=id, action=action, kind=kind, value=value, reason=f"entry {id}", **kwargs)


def match(acl: AccessList, **kwargs: object) -> ACLRule | None:
    kwargs.setdefault("scope", "")
    kwargs.setdefault("now", NOW)
    return acl.match(**kwargs)


def test_empty_list_matches_nothing():
    """An empty list (the RuleSet default) answers None for anyone."""
    assert match(AccessList(), key_id=1, user_id=2, subscription_id=3, ip=ip("10.0.0.1")) is None
    assert len(RuleSet((), None).acl) == 0


def test_deny_beats_allow_whatever_matched_them():
    """A deny wins over an allow, even when the allow is more specific (key vs IP network)."""
    allow_key = rule(1, "allow", "key", 7)
    deny_net = rule(2, "deny", "ip", "10.0.0.0/8")
    acl = AccessList([allow_key, deny_net])
    assert match(acl, key_id=7, ip=ip("10.1.2.3")) is deny_net
    assert match(acl, key_id=7, ip=ip("192.0.2.1")) is allow_key
    assert match(acl, key_id=8, ip=ip("192.0.2.1")) is None


def test_deny_and_allow_for_the_same_target():
    """Two entries on one target: the deny is reported, whatever their order."""
    acl = AccessList([rule(1, "allow", "user", 5), rule(2, "deny", "user", 5)])
    assert match(acl, user_id=5).id == 2


def test_most_specific_entry_of_an_action_is_reported():
    """Among allows: key before subscription before user before IP; longest prefix first."""
    acl = AccessList(
        [
            rule(1, "allow", "ip", "10.0.0.0/8"),
            rule(2, "allow", "ip", "10.1.0.0/16"),
            rule(3, "allow", "user", 5),
            rule(4, "allow", "subscription", 9),
            rule(5, "allow", "key", 7),
        ]
    )
    assert match(acl, ip=ip("10.1.2.3")).id == 2
    assert match(acl, ip=ip("10.2.2.3")).id == 1
    assert match(acl, user_id=5, ip=ip("10.1.2.3")).id == 3
    assert match(acl, subscription_id=9, user_id=5, ip=ip("10.1.2.3")).id == 4
    assert match(acl, key_id=7, subscription_id=9, user_id=5, ip=ip("10.1.2.3")).id == 5


def test_scoped_entry_applies_only_to_its_scope():
    """A scoped entry matches requests with that quota_scope only; an unscoped one matches all."""
    acl = AccessList([rule(1, "deny", "key", 7, scope="generate"), rule(2, "allow", "key", 7)])
    assert match(acl, key_id=7, scope="generate").id == 1
    assert match(acl, key_id=7, scope="search").id == 2
    assert match(acl, key_id=7, scope="").id == 2


def test_expired_entry_lapses_at_match_time():
    """An entry stops matching at its expiry without any rebuild of the list."""
    deny = rule(1, "deny", "ip", "198.51.100.7", expires_at=NOW + 60)
    allow = rule(2, "allow", "ip", "198.51.100.0/24")
    acl = AccessList([deny, allow])
    assert match(acl, ip=ip("198.51.100.7"), now=NOW) is deny
    assert match(acl, ip=ip("198.51.100.7"), now=NOW + 59.999) is deny
    assert match(acl, ip=ip("198.51.100.7"), now=NOW + 60) is allow
    assert match(AccessList([deny]), ip=ip("198.51.100.7"), now=NOW + 3600) is None


def test_key_subscription_and_user_match_only_their_own_ids():
    """A key entry matches that key id only; subscription and user entries their own ids."""
    acl = AccessList([rule(1, "deny", "key", 7), rule(2, "deny", "subscription", 7), rule(3, "deny", "user", 7)])
    assert match(acl, key_id=7).id == 1
    assert match(acl, subscription_id=7).id == 2
    assert match(acl, user_id=7).id == 3
    assert match(acl, key_id=8, subscription_id=8, user_id=8) is None
    # Keys, subscriptions and users are separate namespaces: key 7 is not subscription 7.
    only_key = AccessList([rule(1, "deny", "key", 7)])
    assert match(only_key, subscription_id=7, user_id=7) is None


def test_ids_match_as_text():
    """A user id given as an int matches an entry stored with a string, and the other way round."""
    assert match(AccessList([rule(1, "deny", "user", "5")]), user_id=5).id == 1
    assert match(AccessList([rule(1, "deny", "user", 5)]), user_id="5").id == 1


@pytest.mark.parametrize(
    ("network", "inside", "outside"),
    [
        ("203.0.113.7", "203.0.113.7", "203.0.113.8"),
        ("203.0.113.7/32", "203.0.113.7", "203.0.113.6"),
        ("203.0.113.0/24", "203.0.113.255", "203.0.114.0"),
        ("203.0.113.9/24", "203.0.113.1", "203.0.112.255"),  # host bits are cleared
        ("0.0.0.0/0", "255.255.255.255", "::1"),
        ("2001:db8::1", "2001:db8::1", "2001:db8::2"),
        ("2001:db8::1/128", "2001:db8::1", "2001:db8::"),
        ("2001:db8:1::/48", "2001:db8:1:ffff::1", "2001:db8:2::1"),
        ("::/0", "2001:db8::1", "10.0.0.1"),
        ("10.0.0.0/8", "::ffff:10.9.9.9", "::ffff:11.0.0.1"),  # IPv4-mapped clients are IPv4
        ("::ffff:10.0.0.0/104", "10.9.9.9", "11.0.0.1"),  # IPv4-mapped entries are IPv4
        ("::ffff:10.0.0.0/104", "::ffff:10.9.9.9", "::ffff:11.0.0.1"),
    ],
)
def test_ip_networks(network, inside, outside):
    """Addresses inside the network match; the first one outside does not."""
    acl = AccessList([rule(1, "deny", "ip", network)])
    assert match(acl, ip=ip(inside)) is not None
    assert match(acl, ip=ip(outside)) is None


def test_ip_address_families_are_kept_apart():
    """0.0.0.0/0 does not match IPv6 clients, ::/0 not IPv4 ones; None matches no network."""
    v4, v6 = rule(1, "deny", "ip", "0.0.0.0/0"), rule(2, "deny", "ip", "::/0")
    acl = AccessList([v4, v6])
    assert match(acl, ip=ip("192.0.2.1")) is v4
    assert match(acl, ip=ip("2001:db8::1")) is v6
    assert match(acl, ip=None, key_id=1) is None


def test_parse_network_normalises_and_refuses_junk():
    """Addresses become /32 or /128, host bits are cleared, mapped IPv6 becomes IPv4."""
    assert str(parse_network(" 192.0.2.1 ")) == "192.0.2.1/32"
    assert str(parse_network("2001:DB8::1")) == "2001:db8::1/128"
    assert str(parse_network("192.0.2.99/24")) == "192.0.2.0/24"
    assert str(parse_network("::ffff:192.0.2.1")) == "192.0.2.1/32"
    assert str(parse_network("::ffff:0:0/96")) == "0.0.0.0/0"
    for junk in ("", "10.0.0.256", "10.0.0.0/33", "2001:db8::/129", "fe80::1%eth0", "example.com"):
        with pytest.raises(ValueError, match="is not an IP address or network"):
            parse_network(junk)


def test_rule_refuses_unknown_action_or_kind():
    with pytest.raises(ValueError, match="action"):
        rule(1, "block", "ip", "10.0.0.0/8")
    with pytest.raises(ValueError, match="kind"):
        rule(1, "deny", "email", "x@example.com")


def test_thousands_of_networks_cost_one_lookup_per_prefix_length():
    """Matching against 5,000 entries answers correctly and looks only at the prefix lengths present."""
    acl = build_sample(5000)
    assert len(acl) == 5000
    networks = [r for r in acl if r.kind == "ip" and r.value.version == 4 and r.expires_at is None]
    target = networks[0]
    found = match(acl, ip=target.value.network_address, scope=target.scope or "")
    assert found is not None
    assert found.value.version == 4
    assert found.value.prefixlen >= 16
    assert acl.ip_lookups(target.value.network_address) == len(
        {r.value.prefixlen for r in acl if r.kind == "ip" and r.value.version == 4}
    )


@pytest.mark.django_db
class TestDatabaseAccessList:
    def test_backend_loads_active_entries_as_rules(self):
        """Each kind of entry becomes an ACLRule; entries already expired are left out."""
        sub = SubscriptionFactory()
        key, _ = APIKey.issue(sub)
        user = UserFactory()
        later = timezone.now() + timedelta(hours=1)
        entries = [
            ACLEntry.objects.create(action="deny", api_key=key, reason="leaked key"),
            ACLEntry.objects.create(action="allow", user=user, scope="search", reason="partner"),
            ACLEntry.objects.create(action="deny", subscription=sub, expires_at=later, reason="unpaid"),
            ACLEntry.objects.create(action="deny", cidr="2001:db8::/32", reason="scraper"),
        ]
        expired = ACLEntry.objects.create(action="deny", cidr="192.0.2.1", reason="old")
        ACLEntry.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

        acl = PlansRulesBackend().load().acl
        assert sorted(r.id for r in acl) == [e.pk for e in entries]
        by_id = {r.id: r for r in acl}
        assert (by_id[entries[0].pk].kind, by_id[entries[0].pk].value) == ("key", key.pk)
        assert (by_id[entries[1].pk].kind, by_id[entries[1].pk].value, by_id[entries[1].pk].scope) == (
            "user",
            user.pk,
            "search",
        )
        assert by_id[entries[2].pk].expires_at == pytest.approx(later.timestamp())
        assert by_id[entries[3].pk].value == ipaddress.ip_network("2001:db8::/32")
        now = timezone.now().timestamp()
        assert acl.match(key_id=None, user_id=None, subscription_id=None, ip=ip("192.0.2.1"), scope="", now=now) is None
        assert acl.match(key_id=key.pk, user_id=None, subscription_id=None, ip=None, scope="", now=now).reason == (
            "leaked key"
        )

    def test_entry_that_cannot_compile_is_skipped_not_fatal(self, caplog):
        """A row written around validation (a junk CIDR) is logged and left out."""
        ok = ACLEntry.objects.create(action="deny", cidr="192.0.2.1", reason="ok")
        bad = ACLEntry.objects.create(action="deny", cidr="not-an-ip", reason="bad")
        acl = PlansRulesBackend().load().acl
        assert [r.id for r in acl] == [ok.pk]
        assert f"access-list entry {bad.pk} ignored" in caplog.text

    def test_subscriber_carries_the_key_it_was_resolved_from(self):
        """subscriber_for_key sets key_id; subscriber_for_user leaves it None."""
        user = UserFactory()
        sub = SubscriptionFactory(user=user)
        key, _ = APIKey.issue(sub)
        backend = PlansRulesBackend()
        assert backend.subscriber_for_key(key.key_hash).key_id == key.pk
        assert backend.subscriber_for_user(user.pk).key_id is None
        assert backend.subscriber_for_key(key.key_hash).rules_key == backend.subscriber_for_user(user.pk).rules_key

    def test_saving_or_deleting_an_entry_reloads_the_snapshot(self, django_capture_on_commit_callbacks):
        """An entry saved in the admin or code is in this process's next snapshot and bumps the shared version."""
        rules = default_engine.runtime().rules
        assert len(rules.current().acl) == 0
        version = rules.current().version
        with django_capture_on_commit_callbacks(execute=True):
            entry = ACLEntry.objects.create(action="deny", cidr="203.0.113.0/24", reason="abuse")
        current = rules.current()
        assert current.version != version  # other processes see the new version within RULES_CHECK_INTERVAL
        found = current.acl.match(
            key_id=None,
            user_id=None,
            subscription_id=None,
            ip=ip("203.0.113.9"),
            scope="",
            now=timezone.now().timestamp(),
        )
        assert found.id == entry.pk
        entry.delete()
        assert len(rules.current().acl) == 0
