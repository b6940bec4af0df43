"""Refreshing the feeds: each good list replaces the last, each failure is recorded and keeps it.

An allow list is good only if, with every other network allowed, it stays within ``MAX_ALLOW_SHARE`` of the
public addresses (:mod:`plans.feeds.share`): feeds are refreshed one after another, so of two feeds that pass
the ceiling only together, the second refreshed is refused.

Rows are written with ``QuerySet.update`` (no signals), and the rules version is bumped once, at the end,
when a list in force changed: a failure, or a list fetched again unchanged, reloads nobody's rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import F
from django.utils import timezone

from quotas import internal_api
from quotas.formats.acl import parse_network

from ..models import ACLFeed
from ..models.feeds import FeedError
from .parse import parse_feed
from .share import over_ceiling
from .source import read_source

logger = logging.getLogger(__name__)

#: Reads a feed's source (a seam: the default fetches the URL or reads the file).
Reader = Callable[[str], bytes]


@dataclass
class RefreshReport:
    """What one refresh did: feeds whose list changed, stayed the same, or failed (by name, with why)."""

    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def refresh_feeds(
    feeds: Iterable[ACLFeed] | None = None, *, now: datetime | None = None, reader: Reader = read_source
) -> RefreshReport:
    """Fetch and store every enabled feed (or ``feeds``); bump the rules version if a list in force changed."""
    now = now or timezone.now()
    report = RefreshReport()
    for feed in feeds if feeds is not None else ACLFeed.objects.filter(enabled=True):
        try:
            networks = parse_feed(reader(feed.source), feed.action)
            allowed = feed.action == "allow" and feed.enabled  # a disabled feed's list lifts no limit
            too_many = allowed and over_ceiling(map(parse_network, networks), except_feed=feed.pk)
            if too_many:
                raise FeedError(f"refused: {too_many}")
        except (FeedError, ValueError) as exc:
            record_failure(feed, str(exc), now)
            report.failed[feed.name] = str(exc)
            continue
        if store(feed, networks, now):
            report.changed.append(feed.name)
        else:
            report.unchanged.append(feed.name)
    if report.changed:
        internal_api.rules_changed()  # this process at once, the others within a second of the commit
    return report


def store(feed: ACLFeed, networks: list[str], now: datetime) -> bool:
    """Keep ``networks`` as ``feed``'s good list, fetched at ``now``; whether the list in force changed."""
    text = "\n".join(networks)
    changed = text != feed.entries
    ACLFeed.objects.filter(pk=feed.pk).update(
        entries=text, entry_count=len(networks), fetched_at=now, consecutive_failures=0, last_error=""
    )
    if changed:
        logger.info("plans: ACL feed %s now lists %d networks", feed.name, len(networks))
    return changed and feed.enabled


def record_failure(feed: ACLFeed, error: str, now: datetime) -> None:
    """Record why ``feed`` failed at ``now``; its last good list (``entries``) is left as it was."""
    ACLFeed.objects.filter(pk=feed.pk).update(
        last_error=error[:1000], last_error_at=now, consecutive_failures=F("consecutive_failures") + 1
    )
    kept = f"its last good list of {feed.entry_count} networks is kept" if feed.fetched_at else "it has no list yet"
    logger.warning("plans: ACL feed %s failed (%s); %s", feed.name, error, kept)
