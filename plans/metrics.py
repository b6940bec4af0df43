"""The plans app's series on /metrics, computed at each scrape (see quotas.metrics_exposition.add_default_series)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.utils import timezone

from quotas.metrics_exposition import DefaultSeries

from .models import ACLFeed, ClientBan


def active_ban_series() -> Iterator[DefaultSeries]:
    """``quota_active_bans``: the bans in force now (each ban the engine starts is recorded as a ClientBan).

    One COUNT per scrape, on the rows not lifted; a ban's end is its ``until``, so nothing has to mark it.
    """
    yield {}, ClientBan.objects.filter(lifted_at__isnull=True, until__gt=timezone.now()).count()


def _enabled_feeds() -> list[dict[str, Any]]:
    fields = ("name", "fetched_at", "consecutive_failures", "entry_count")
    return [dict(row) for row in ACLFeed.objects.filter(enabled=True).values(*fields)]


def feed_age_series() -> Iterator[DefaultSeries]:
    """``quota_acl_feed_age_seconds``: per enabled feed, seconds since its last good fetch (+Inf: none yet)."""
    now = timezone.now()
    for feed in _enabled_feeds():
        fetched = feed["fetched_at"]
        yield {"feed": feed["name"]}, (now - fetched).total_seconds() if fetched else float("inf")


def feed_failure_series() -> Iterator[DefaultSeries]:
    """``quota_acl_feed_failures``: per enabled feed, its failed fetches in a row."""
    for feed in _enabled_feeds():
        yield {"feed": feed["name"]}, feed["consecutive_failures"]


def feed_entry_series() -> Iterator[DefaultSeries]:
    """``quota_acl_feed_entries``: per enabled feed, the networks of its last good list."""
    for feed in _enabled_feeds():
        yield {"feed": feed["name"]}, feed["entry_count"]
