"""System checks for ``settings.QUOTAS['ADAPTIVE']`` (ids adaptive.E0xx / adaptive.W0xx). None opens a connection."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register

from quotas.checks import check_dict
from quotas.settings_spec import ADAPTIVE

from .conf import SETTINGS, adaptive_settings

TASK = "adaptive.control"


#: Two intervals closer than this (seconds) are the same interval.
_SAME_SECONDS = 1e-6


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@register(Tags.compatibility)
def check_settings(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Validate every adaptive setting (``QUOTAS['ADAPTIVE']``) against its description."""
    raw = adaptive_settings.user_settings()
    label = "QUOTAS['ADAPTIVE']"
    if not isinstance(raw, dict):
        return ADAPTIVE.check(raw, label)  # quotas describes the dict itself (adaptive.E001)
    return check_dict(label, raw, SETTINGS, "adaptive.W001")


@register(Tags.compatibility)
def check_beat_schedule(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """Celery beat must run the controller, and as often as QUOTAS['ADAPTIVE']['INTERVAL'] says."""
    schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None) or {}
    entries = [e for e in schedule.values() if isinstance(e, dict) and e.get("task") == TASK]
    if not entries:
        return [
            Warning(
                f"No CELERY_BEAT_SCHEDULE entry runs {TASK!r}: limits will never adapt to load.",
                hint=f'Add {{"task": "{TASK}", "schedule": QUOTAS["ADAPTIVE"]["INTERVAL"]}}.',
                id="adaptive.W002",
            )
        ]
    every = entries[0].get("schedule")
    seconds = every.total_seconds() if isinstance(every, timedelta) else every
    interval = adaptive_settings.INTERVAL
    if _number(seconds) and _number(interval) and abs(seconds - interval) > _SAME_SECONDS:
        return [
            Warning(
                f"Beat runs {TASK!r} every {seconds} s but QUOTAS['ADAPTIVE']['INTERVAL'] is {interval} s.",
                hint="Use QUOTAS['ADAPTIVE']['INTERVAL'] as the schedule so the run lock and the checks agree.",
                id="adaptive.W003",
            )
        ]
    return []
