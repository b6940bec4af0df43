"""The usage day a count belongs to, where budget days begin (``QUOTAS['BUDGET_TIME_ZONE']``): one rule for the
store's scripts' arguments, the in-process usage buffer and settlement."""

from __future__ import annotations

from quotas.formats.periods import UsageDay, usage_day
from quotas.settings import quota_settings


def usage_day_of(now: float) -> UsageDay:
    """The usage day of ``now``, where budget days begin (``QUOTAS['BUDGET_TIME_ZONE']``)."""
    return usage_day(now, str(quota_settings.BUDGET_TIME_ZONE))


def day_of(now: float) -> str:
    """``"YYYYMMDD"`` of ``now``'s usage day: the usage key a count made at ``now`` belongs to."""
    return usage_day_of(now).stamp
