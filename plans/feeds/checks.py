"""System checks of the allow and deny list feeds (ids quota_plans.E01x / W01x).

Their settings (``QUOTAS['ACL_FEEDS']``) are checked on every run; the beat schedule and each feed's state read
the database, so they run with ``check --database default`` and in ``manage.py quota_doctor``, which reports a
failing feed as a warning. None opens a connection to a feed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register
from django.db import DatabaseError
from django.utils import timezone
from django.utils.timesince import timesince

from ..conf import feed_settings

TASK = "plans.refresh_acl_feeds"


def _enabled_feeds() -> list[Any]:
    from ..models import ACLFeed

    return list(ACLFeed.objects.filter(enabled=True))


@register(Tags.database)
def check_feeds(app_configs: Iterable[Any] | None = None, databases: Any = None, **kwargs: Any) -> list:
    """quota_plans.W011: enabled feeds but no beat entry refreshing them; W012: a feed whose last fetch failed
    (its last good list is still applied); W013: an enabled feed never fetched successfully (nothing applied)."""
    if not databases:
        return []
    try:
        feeds = _enabled_feeds()
    except DatabaseError:  # no tables yet (before migrate)
        return []
    if not feeds:
        return []
    return _schedule_warnings() + [w for feed in feeds for w in _feed_warnings(feed)]


def _schedule_warnings() -> list[CheckMessage]:
    schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None) or {}
    if any(isinstance(e, dict) and e.get("task") == TASK for e in schedule.values()):
        return []
    every = float(feed_settings.INTERVAL)
    return [
        Warning(
            f"No CELERY_BEAT_SCHEDULE entry runs {TASK!r}: the enabled allow and deny list feeds are never refreshed.",
            hint=f'Add {{"task": "{TASK}", "schedule": {every}}} (QUOTAS["ACL_FEEDS"]["INTERVAL"]).',
            id="quota_plans.W011",
        )
    ]


def _feed_warnings(feed: Any) -> list[CheckMessage]:
    now = timezone.now()
    if feed.is_failing:
        since = timesince(feed.last_error_at, now) if feed.last_error_at else "?"
        kept = (
            f"its last good list ({feed.entry_count} networks, fetched {timesince(feed.fetched_at, now)} ago) "
            "is still applied"
            if feed.fetched_at
            else "it has never been fetched, so nothing of it is applied"
        )
        return [
            Warning(
                f"ACL feed '{feed.name}' ({feed.source}) failed {feed.consecutive_failures} time(s) in a row, "
                f"last {since} ago: {feed.last_error}; {kept}.",
                hint="Fix the feed's source (see its page in the admin); the next refresh applies it.",
                obj=feed,
                id="quota_plans.W012",
            )
        ]
    if feed.fetched_at is None:
        return [
            Warning(
                f"ACL feed '{feed.name}' has not been fetched yet: nothing of it is applied.",
                hint=f"Run the {TASK} task (beat runs it every QUOTAS['ACL_FEEDS']['INTERVAL'] seconds), or use "
                "the feed admin's 'Refresh now' action.",
                obj=feed,
                id="quota_plans.W013",
            )
        ]
    return []
