"""Keeping the tables that grow with traffic bounded: retention, and anonymous usage folded once final.

The ``usage.prune`` task (a thin shell around :func:`prune`) runs once a day. It deletes what
``QUOTAS['RETENTION']`` no longer keeps: old usage records, budget alerts and ban records, in batches of
:data:`BATCH` rows by primary key, each its own statement, so no single delete holds locks on a large table
for long; running it twice, or concurrently, deletes each row once.

It also folds anonymous usage (:data:`quotas.store.usage_hash_format.ANONYMOUS_CLIENT`). The flush stores it as one
row per usage hash, plan, scope and day, so that each row is an exact copy of a total that Redis may still change.
Once a day's hashes have expired in Redis (:data:`FINAL_AFTER_DAYS`) nothing can change them any more, and
their rows are summed into one per plan, scope and day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db import transaction
from django.db.models import Max, Q, QuerySet, Sum
from django.utils import timezone

from plans.models import ClientBan
from quotas.internal_api import ANONYMOUS_CLIENT, USAGE_TTL_DAYS, usage_date
from quotas.settings import quota_settings

from .models import COUNTERS, BudgetAlert, UsageRecord

#: Rows deleted per statement.
BATCH = 5_000
#: Days after which a day's usage hashes are gone from Redis, so no flush can write that day again: a hash
#: expires USAGE_TTL_DAYS after its day ends; one more day covers a clock of this process behind Redis's.
FINAL_AFTER_DAYS = USAGE_TTL_DAYS + 2


@dataclass(frozen=True, slots=True)
class PruneReport:
    """Rows deleted from each table (0 where its retention is None)."""

    usage_records: int
    budget_alerts: int
    bans: int
    anonymous_rows_folded: int = 0


def prune(now: datetime | None = None) -> PruneReport:
    """Delete the rows ``QUOTAS['RETENTION']`` keeps no longer, as of ``now`` (default: the current time)."""
    now = now or timezone.now()
    retention = quota_settings.RETENTION
    usage_days, alert_days, ban_days = retention["USAGE_DAYS"], retention["BUDGET_ALERTS_DAYS"], retention["BANS_DAYS"]
    usage = 0
    if usage_days is not None:
        # A record's day is a usage day (BUDGET_TIME_ZONE): it is kept for USAGE_DAYS whole days after that day.
        usage = _delete(UsageRecord.objects.filter(day__lt=usage_date(now) - timedelta(days=usage_days)))
    alerts = 0
    if alert_days is not None:
        alerts = _delete(BudgetAlert.objects.filter(created_at__lt=now - timedelta(days=alert_days)))
    bans = 0
    if ban_days is not None:
        cutoff = now - timedelta(days=ban_days)
        ended = Q(lifted_at__lt=cutoff) | Q(lifted_at__isnull=True, until__lt=cutoff)
        bans = _delete(ClientBan.objects.filter(ended))
    return PruneReport(usage, alerts, bans, fold_anonymous(now))


def fold_anonymous(now: datetime | None = None) -> int:
    """Sum the anonymous usage rows of every final day into one per plan, scope and day; returns rows removed.

    A day is final once no flush can write it again (:data:`FINAL_AFTER_DAYS`). Each group is folded in a
    transaction of its own: its rows are locked, summed (counters and cost alike: each row holds the total of
    a different hash), deleted, and the sum written as one row with an empty generation.
    """
    now = now or timezone.now()
    last_final = usage_date(now) - timedelta(days=FINAL_AFTER_DAYS)
    anonymous = UsageRecord.objects.filter(client=ANONYMOUS_CLIENT, day__lte=last_final)
    folded = 0
    for plan_key, scope, day in anonymous.values_list("plan_key", "scope", "day").order_by().distinct():
        folded += _fold(plan_key, scope, day)
    return folded


def _fold(plan_key: int, scope: str, day: date) -> int:
    with transaction.atomic():
        rows = UsageRecord.objects.select_for_update().filter(
            client=ANONYMOUS_CLIENT, plan_key=plan_key, scope=scope, day=day
        )
        found = list(rows.values_list("pk", flat=True))
        if len(found) < 2:  # noqa: PLR2004 - one row is already folded
            return 0
        sums = rows.aggregate(**{c: Sum(c) for c in COUNTERS}, observed_at=Max("observed_at"), plan=Max("plan"))
        UsageRecord.objects.filter(pk__in=found).delete()
        UsageRecord.objects.create(
            client=ANONYMOUS_CLIENT, plan_id=sums.pop("plan"), plan_key=plan_key, scope=scope, day=day,
            generation="", observed_at=sums.pop("observed_at"), **{c: sums[c] or 0 for c in COUNTERS},
        )  # fmt: skip
        return len(found) - 1


def _delete(rows: QuerySet) -> int:
    deleted = 0
    while True:
        ids = list(rows.order_by("pk").values_list("pk", flat=True)[:BATCH])
        if not ids:
            return deleted
        count, _ = rows.model.objects.filter(pk__in=ids).delete()
        deleted += count
