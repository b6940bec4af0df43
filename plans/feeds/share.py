"""How much of the public address space the allow lists together lift every limit for, against a ceiling.

One allow feed of ``2000::/3`` (every public IPv6 address), or two feeds each allowing three eighths of IPv4, lift
every limit for nearly everyone, though no single line, nor a single feed, covers half of a family. So what a feed
refresh or an admin's allow entry would add is measured together with everything else allowed by network: every
enabled allow feed's list and every allow entry for a network that has not expired (a scoped one too: it lifts
that scope's limits), against ``QUOTAS['ACL_FEEDS']['MAX_ALLOW_SHARE']`` of each IP version's public addresses
(:func:`quotas.formats.acl.public_share`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from django.db.models import Q
from django.utils import timezone

from quotas.formats.acl import IPNetwork, over_share, parse_network

from ..conf import feed_settings
from ..models import ACLEntry, ACLFeed

#: Where the ceiling is set, as messages name it.
SETTING = "QUOTAS['ACL_FEEDS']['MAX_ALLOW_SHARE']"


def parsed(texts: Iterable[str]) -> Iterator[IPNetwork]:
    """The networks of stored ``texts`` that parse."""
    for text in texts:
        try:
            yield parse_network(text)
        except ValueError:  # stored past validation: the rules snapshot leaves it out too
            continue


def allowed_networks(*, except_feed: int | None = None, except_entry: int | None = None) -> list[IPNetwork]:
    """Every network allowed now: enabled allow feeds' lists and unexpired allow entries for networks, but the
    feed ``except_feed`` and the entry ``except_entry`` (the ones being replaced)."""
    entries = ACLEntry.objects.filter(action=ACLEntry.Action.ALLOW).exclude(cidr="")
    entries = entries.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    feeds = ACLFeed.objects.filter(enabled=True, action=ACLEntry.Action.ALLOW).exclude(entries="")
    if except_entry is not None:
        entries = entries.exclude(pk=except_entry)
    if except_feed is not None:
        feeds = feeds.exclude(pk=except_feed)
    networks = list(parsed(entries.values_list("cidr", flat=True)))
    for text in feeds.values_list("entries", flat=True):
        networks.extend(parsed(text.split()))
    return networks


def over_ceiling(
    adding: Iterable[IPNetwork], *, except_feed: int | None = None, except_entry: int | None = None
) -> str | None:
    """Why allowing ``adding`` besides :func:`allowed_networks` would pass ``MAX_ALLOW_SHARE``, or None."""
    ceiling = float(feed_settings.MAX_ALLOW_SHARE)
    why = over_share([*allowed_networks(except_feed=except_feed, except_entry=except_entry), *adding], ceiling)
    return f"the allow lists together would cover {why} ({SETTING})" if why else None
