"""What no signal reports, found by looking: bans started and ended, keys about to expire, refusals that go on,
and the alert thresholds a subscription set for itself (:mod:`notifications.thresholds`).

The Celery beat task ``notifications.watch`` calls :func:`watch` about once a minute. Each finding becomes an
event (:func:`notifications.record.record_event`) whose ``dedupe_key`` names it (a ban, a key's expiry, a
subscription's hour), so looking again finds it recorded and sends nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from plans.models import APIKey, ClientBan, Subscription
from quotas.internal_api import STORE_ERRORS, back_office

from .conf import notification_settings
from .events import BAN_ENDED, CLIENT_BANNED, KEY_EXPIRING, REFUSALS_SUSTAINED
from .models import Event
from .record import record_event
from .thresholds import threshold_findings

#: How far back a run looks for bans: more than a missed run or two, less than every ban ever.
LOOKBACK = timedelta(days=1)
#: The span a sustained refusal rate is measured over (the design's "five minutes").
REFUSAL_WINDOW = timedelta(minutes=5)
#: Subscriptions looked at for refusals: the hour's most refused clients (the history keeps its top 100).
TOP = 100


@dataclass(slots=True)
class WatchReport:
    """The events one look recorded, by type."""

    recorded: dict[str, int]


def watch(now: datetime | None = None) -> WatchReport:
    """Record the events found at ``now`` (default: now). Raises database errors; a Redis failure only skips
    the refusals."""
    now = now or timezone.now()
    report = WatchReport({})
    found = [*_bans(now), *_expiring_keys(now), *_refusals(now), *_new(threshold_findings())]
    for event_type, subscription, key, data in found:
        if record_event(event_type, subscription, key, data, now) is not None:
            report.recorded[event_type] = report.recorded.get(event_type, 0) + 1
    return report


def _who(subscription: Subscription) -> dict[str, Any]:
    return {"id": subscription.pk, "name": subscription.name, "plan": subscription.plan.slug}


def _new(found: Iterable[tuple[str, Subscription, str, dict[str, Any]]]) -> list[tuple[str, Subscription, str, dict]]:
    """The findings not recorded yet (one query instead of an insert failing per finding)."""
    found = list(found)
    known = set(Event.objects.filter(dedupe_key__in=[f[2] for f in found]).values_list("dedupe_key", flat=True))
    return [f for f in found if f[2] not in known]


def _bans(now: datetime) -> list[tuple[str, Subscription, str, dict[str, Any]]]:
    bans = ClientBan.objects.filter(subscription__isnull=False).select_related("subscription__plan")
    recent = bans.filter(Q(created_at__gte=now - LOOKBACK) | Q(until__gte=now - LOOKBACK))
    found: list[tuple[str, Subscription, str, dict[str, Any]]] = []
    for ban in recent:
        subscription = ban.subscription
        if subscription is None:  # filtered out above; deleted since
            continue
        who = {"subscription": _who(subscription), "client": ban.client, "ban": ban.pk}
        found.append((CLIENT_BANNED, subscription, f"{CLIENT_BANNED}:{ban.pk}",
                      {**who, "until": ban.until.isoformat()}))  # fmt: skip
        ended = ban.lifted_at if ban.lifted_at is not None else (ban.until if ban.until <= now else None)
        if ended is not None:
            how = "lifted" if ban.lifted_at is not None else "expired"
            found.append((BAN_ENDED, subscription, f"{BAN_ENDED}:{ban.pk}",
                          {**who, "ended": ended.isoformat(), "how": how}))  # fmt: skip
    return _new(found)


def _expiring_keys(now: datetime) -> list[tuple[str, Subscription, str, dict[str, Any]]]:
    notice = timedelta(days=int(notification_settings.KEY_EXPIRY_NOTICE_DAYS))
    keys = APIKey.objects.filter(revoked_at__isnull=True, expires_at__gt=now, expires_at__lte=now + notice)
    found = [
        (KEY_EXPIRING, key.subscription, f"{KEY_EXPIRING}:{key.pk}:{key.expires_at.isoformat()}",
         {"subscription": _who(key.subscription), "expires_at": key.expires_at.isoformat(),
          "key": {"id": key.pk, "name": key.name, "prefix": key.prefix}})
        for key in keys.select_related("subscription__plan")
        if key.expires_at is not None
    ]  # fmt: skip
    return _new(found)


def _refusals(now: datetime) -> list[tuple[str, Subscription, str, dict[str, Any]]]:
    """Subscriptions refused at least ``REFUSALS_ALERT`` times in the last five minutes, from the engine's
    per-subscriber history (one event per subscription and hour)."""
    reads = back_office()
    start = now - REFUSAL_WINDOW
    try:
        candidates = [tag for tag, _ in reads.top_clients(start, now, by="denied", limit=TOP) if tag.startswith("s.")]
        refused = {
            tag: sum(p.denied for p in reads.client_history(tag, "minute", start=start + timedelta(minutes=1), end=now))
            for tag in candidates
        }
    except STORE_ERRORS:
        return []  # Redis away: the next look sees these minutes again, while they are in the window
    over = {int(tag[2:]): n for tag, n in refused.items() if n >= int(notification_settings.REFUSALS_ALERT)}
    subscriptions = Subscription.objects.filter(pk__in=over).select_related("plan")
    hour = now.replace(minute=0, second=0, microsecond=0).isoformat()
    found = [
        (REFUSALS_SUSTAINED, sub, f"{REFUSALS_SUSTAINED}:{sub.pk}:{hour}",
         {"subscription": _who(sub), "refused": over[sub.pk], "window_seconds": int(REFUSAL_WINDOW.total_seconds()),
          "at": now.isoformat()})
        for sub in subscriptions
    ]  # fmt: skip
    return _new(found)
