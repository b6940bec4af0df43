"""Tables that grow with traffic keep their rows for QUOTAS['RETENTION'] and no longer (the usage.prune task)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from plans.models import ClientBan
from usage import tasks
from usage.models import BudgetAlert, UsageRecord
from usage.retention import prune

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def usage_row(day: date, client: str = "s.1") -> UsageRecord:
    return UsageRecord.objects.create(client=client, day=day, allowed=1, observed_at=NOW)


def alert(raised: datetime) -> BudgetAlert:
    row = BudgetAlert.objects.create(
        client="s.1", budget="day-budget", period_start=raised, threshold=80, spent_micros=1, amount_micros=2
    )
    BudgetAlert.objects.filter(pk=row.pk).update(created_at=raised)  # auto_now_add cannot be set at create
    return row


def ban(until: datetime, lifted_at: datetime | None = None) -> ClientBan:
    return ClientBan.objects.create(client="s.1", until=until, lifted_at=lifted_at)


def test_each_table_keeps_its_retention_and_no_longer(set_quotas):
    set_quotas("RETENTION", USAGE_DAYS=400, BUDGET_ALERTS_DAYS=30, BANS_DAYS=90)
    old_usage = usage_row(date(2025, 10, 20))  # 401 days before 2026-11-25
    kept_usage = usage_row(date(2025, 10, 21), client="s.2")  # exactly 400 days before: kept
    old_alert, kept_alert = alert(NOW - timedelta(days=31)), alert(NOW - timedelta(days=29))
    ended = ban(until=NOW - timedelta(days=91))
    lifted = ban(until=NOW + timedelta(days=1), lifted_at=NOW - timedelta(days=95))
    recent = ban(until=NOW - timedelta(days=10))
    active = ban(until=NOW + timedelta(hours=1))

    report = prune(NOW)

    assert (report.usage_records, report.budget_alerts, report.bans) == (1, 1, 2)
    assert list(UsageRecord.objects.values_list("pk", flat=True)) == [kept_usage.pk]
    assert not UsageRecord.objects.filter(pk=old_usage.pk).exists()
    assert list(BudgetAlert.objects.values_list("pk", flat=True)) == [kept_alert.pk]
    assert not BudgetAlert.objects.filter(pk=old_alert.pk).exists()
    assert set(ClientBan.objects.values_list("pk", flat=True)) == {recent.pk, active.pk}
    assert not ClientBan.objects.filter(pk__in=[ended.pk, lifted.pk]).exists()
    assert prune(NOW) == type(report)(0, 0, 0, 0)  # a second run deletes nothing more


def test_none_keeps_everything(set_quotas):
    set_quotas("RETENTION", USAGE_DAYS=None, BUDGET_ALERTS_DAYS=None, BANS_DAYS=None)
    usage_row(date(2001, 1, 1))
    alert(NOW - timedelta(days=5000))
    ban(until=NOW - timedelta(days=5000))
    assert prune(NOW) == type(prune(NOW))(0, 0, 0, 0)
    assert UsageRecord.objects.count() == BudgetAlert.objects.count() == ClientBan.objects.count() == 1


def test_the_defaults_keep_400_days_of_usage_and_90_of_bans():
    today = timezone.now().date()
    usage_row(today - timedelta(days=399))
    usage_row(today - timedelta(days=402), client="s.2")
    ban(until=timezone.now() - timedelta(days=91))
    report = prune()
    assert (report.usage_records, report.bans) == (1, 1)


def test_the_task_returns_the_report(set_quotas):
    """The task is a thin shell around prune(): its body, called directly, returns the report as a dict."""
    set_quotas("RETENTION", USAGE_DAYS=1)
    usage_row(date(2020, 1, 1))
    assert tasks.prune.run() == {"usage_records": 1, "budget_alerts": 0, "bans": 0, "anonymous_rows_folded": 0}


@pytest.mark.parametrize("value", [0, -1, "30", 1.5])
def test_a_bad_retention_is_a_system_check_error(set_quotas, value):
    from django.core import checks

    set_quotas("RETENTION", USAGE_DAYS=value)
    assert "quotas.E056" in [m.id for m in checks.run_checks()]


def test_the_beat_schedule_prunes_once_a_day(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["usage-prune"]
    assert entry["task"] == "usage.prune"
    assert entry["schedule"] == 86_400.0
