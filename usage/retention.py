"""Deleting what ``QUOTAS['RETENTION']`` no longer keeps: old usage records, budget alerts and ban records.

The tables that grow with traffic are pruned once a day by the ``usage.prune`` task (a thin shell around
:func:`prune`). Rows go in batches of :data:`BATCH` by primary key, each its own statement, so no single
delete holds locks on a large table for long; running it twice, or concurrently, deletes each row once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from plans.models import ClientBan
from quotas.conf import quota_settings

from .models import BudgetAlert, UsageRecord

#: Rows deleted per statement.
BATCH = 5_000


@dataclass(frozen=True, slots=True)
class PruneReport:
    """Rows deleted from each table (0 where its retention is None)."""

    usage_records: int
    budget_alerts: int
    bans: int


def prune(now: datetime | None = None) -> PruneReport:
    """Delete the rows ``QUOTAS['RETENTION']`` keeps no longer, as of ``now`` (default: the current time)."""
    now = now or timezone.now()
    retention = quota_settings.RETENTION
    usage_days, alert_days, ban_days = retention["USAGE_DAYS"], retention["BUDGET_ALERTS_DAYS"], retention["BANS_DAYS"]
    usage = 0
    if usage_days is not None:
        # A record's day is a UTC date: it is kept for USAGE_DAYS whole days after that day.
        usage = _delete(UsageRecord.objects.filter(day__lt=(now - timedelta(days=usage_days)).date()))
    alerts = 0
    if alert_days is not None:
        alerts = _delete(BudgetAlert.objects.filter(created_at__lt=now - timedelta(days=alert_days)))
    bans = 0
    if ban_days is not None:
        cutoff = now - timedelta(days=ban_days)
        ended = Q(lifted_at__lt=cutoff) | Q(lifted_at__isnull=True, until__lt=cutoff)
        bans = _delete(ClientBan.objects.filter(ended))
    return PruneReport(usage, alerts, bans)


def _delete(rows: QuerySet) -> int:
    deleted = 0
    while True:
        ids = list(rows.order_by("pk").values_list("pk", flat=True)[:BATCH])
        if not ids:
            return deleted
        count, _ = rows.model.objects.filter(pk__in=ids).delete()
        deleted += count
