"""System checks of the adaptive app (ids adaptive.E0xx / adaptive.W0xx).

Its settings (``settings.QUOTAS['ADAPTIVE']``), the beat schedule, the ``[adaptive]`` extra and the
load-reporting middleware. None opens a connection.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.utils.module_loading import import_string

from .conf import adaptive_settings

TASK = "adaptive.control"
#: What the [adaptive] extra installs: the controller runs on Celery beat, the load signals come from psutil.
EXTRA = ("celery", "psutil")
LOAD_REPORTER = "adaptive.middleware.LoadReporterMiddleware"


#: Two intervals closer than this (seconds) are the same interval.
_SAME_SECONDS = 1e-6


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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


def missing_extra() -> list[str]:
    """The modules of the ``[adaptive]`` extra that cannot be imported (none are imported here)."""
    return [name for name in EXTRA if importlib.util.find_spec(name) is None]


@register(Tags.compatibility)
def check_extra(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """celery and psutil come with the ``[adaptive]`` extra; without them the controller never runs."""
    missing = missing_extra()
    if not missing:
        return []
    return [
        Error(
            f"The adaptive app needs {' and '.join(missing)}, which cannot be imported: its controller runs on "
            "Celery beat and reads the host's load with psutil.",
            hint='Install the [adaptive] extra: pip install "django-quota-platform[adaptive]".',
            id="adaptive.E012",
        )
    ]


def _reports_load(middleware: list[str]) -> bool:
    """``middleware`` holds LoadReporterMiddleware or a subclass of it (as django.contrib.admin's checks look)."""
    if LOAD_REPORTER in middleware:
        return True
    try:
        from .middleware import LoadReporterMiddleware
    except ImportError:  # psutil missing: adaptive.E012 says so
        return False
    for path in middleware:
        try:
            cls = import_string(path)
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, LoadReporterMiddleware):
            return True
    return False


@register(Tags.compatibility)
def check_load_reporter(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Each process serving requests publishes its host's load from LoadReporterMiddleware (unless reporting is
    off: REPORT_INTERVAL = 0); without it the controller sees none of this process's load."""
    if adaptive_settings.REPORT_INTERVAL == 0 or _reports_load(list(settings.MIDDLEWARE)):
        return []
    return [
        Warning(
            "The adaptive app is installed but LoadReporterMiddleware is not in MIDDLEWARE: adaptive limits will see "
            "no load from this process.",
            hint=f"Add '{LOAD_REPORTER}' to MIDDLEWARE (or set QUOTAS['ADAPTIVE']['REPORT_INTERVAL'] = 0).",
            id="adaptive.W004",
        )
    ]
