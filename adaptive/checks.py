"""System checks for ``settings.QUOTAS['ADAPTIVE']`` (ids adaptive.E0xx / adaptive.W0xx). None opens a connection."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from quotas.checks import unknown_settings

from .conf import AGGREGATES, DEFAULTS, FRACTION_SIGNALS, KNOWN_SIGNALS, adaptive_settings

TASK = "adaptive.control"


def _error(msg: str, hint: str, n: int) -> Error:
    return Error(msg, hint=hint, id=f"adaptive.E{n:03d}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@register(Tags.compatibility)
def check_settings(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list:
    """Validate every adaptive setting (``QUOTAS['ADAPTIVE']``)."""
    raw = adaptive_settings.user_settings()
    if not isinstance(raw, dict):
        return [
            _error(
                "QUOTAS['ADAPTIVE'] must be a dict.",
                "Set QUOTAS['ADAPTIVE'] = {...} in your settings, or leave it out.",
                1,
            ),
        ]
    errors: list = [*unknown_settings("QUOTAS['ADAPTIVE']", raw, DEFAULTS, "adaptive.W001")]
    s = adaptive_settings
    for name in ("INTERVAL", "SAMPLE_TTL", "PUBLISH_TTL"):
        if not _number(getattr(s, name)) or getattr(s, name) <= 0:
            errors.append(
                _error(
                    f"QUOTAS['ADAPTIVE'][{name!r}] must be a number of seconds > 0.", f"Default: {DEFAULTS[name]}.", 2
                )
            )
    for name in ("FAST_SECONDS", "SLOW_SECONDS", "DECREASE_COOLDOWN", "RECOVERY_DELAY", "NO_SIGNAL_HOLD"):
        if not _number(getattr(s, name)) or getattr(s, name) < 0:
            errors.append(
                _error(
                    f"QUOTAS['ADAPTIVE'][{name!r}] must be a number of seconds >= 0.", f"Default: {DEFAULTS[name]}.", 2
                )
            )
    report = s.REPORT_INTERVAL
    if not _number(report) or (report != 0 and report < 1):
        errors.append(
            _error(
                f"QUOTAS['ADAPTIVE']['REPORT_INTERVAL'] = {report!r} must be 0 (off) or at least 1 second.",
                "Each web process publishes its load at most once a second.",
                3,
            )
        )
    elif _number(s.SAMPLE_TTL) and 0 < s.SAMPLE_TTL <= report:
        errors.append(
            _error(
                "QUOTAS['ADAPTIVE']['SAMPLE_TTL'] must be longer than REPORT_INTERVAL, or live hosts would drop out.",
                "Use about 5 times REPORT_INTERVAL (default 5.0 for 1.0).",
                4,
            )
        )
    if _number(s.PUBLISH_TTL) and _number(s.INTERVAL) and 0 < s.PUBLISH_TTL <= 2 * s.INTERVAL:
        errors.append(
            _error(
                "QUOTAS['ADAPTIVE']['PUBLISH_TTL'] must be longer than two controller intervals.",
                "Otherwise the multipliers expire between runs. Default: 60.0 for an INTERVAL of 5.0.",
                11,
            )
        )
    errors += _check_signals(s.SIGNALS)
    factor, rate, level = s.DECREASE_FACTOR, s.RECOVERY_RATE, s.MIN_LEVEL
    if not _number(factor) or not 0 < factor < 1:
        errors.append(
            _error(f"QUOTAS['ADAPTIVE']['DECREASE_FACTOR'] = {factor!r} must be between 0 and 1.", "Default: 0.7.", 6)
        )
    if not _number(rate) or rate <= 0:
        errors.append(
            _error(
                f"QUOTAS['ADAPTIVE']['RECOVERY_RATE'] = {rate!r} must be > 0 (level per second).", "Default: 0.02.", 6
            )
        )
    if not _number(level) or not 0 < level <= 1:
        errors.append(_error(f"QUOTAS['ADAPTIVE']['MIN_LEVEL'] = {level!r} must be in (0, 1].", "Default: 0.05.", 6))
    errors += _check_floors(s.DEFAULT_FLOOR, s.FLOORS)
    if s.AGGREGATE not in AGGREGATES:
        errors.append(
            _error(
                f"QUOTAS['ADAPTIVE']['AGGREGATE'] = {s.AGGREGATE!r} is unknown.",
                f"Choose one of: {', '.join(AGGREGATES)}.",
                8,
            )
        )
    days = s.RETENTION_DAYS
    if not isinstance(days, int) or isinstance(days, bool) or days < 1:
        errors.append(_error(f"QUOTAS['ADAPTIVE']['RETENTION_DAYS'] = {days!r} must be an int >= 1.", "Default: 7.", 9))
    for name in ("ENABLED", "DB_SERVER_SIGNAL"):
        if not isinstance(getattr(s, name), bool):
            errors.append(
                _error(f"QUOTAS['ADAPTIVE'][{name!r}] must be True or False.", f"Default: {DEFAULTS[name]}.", 10)
            )
    return errors


def _check_signals(signals: Any) -> list:
    hint = 'For example {"cpu": {"low": 0.6, "high": 0.8, "critical": 0.95}}.'
    if not isinstance(signals, dict) or not signals:
        return [_error("QUOTAS['ADAPTIVE']['SIGNALS'] must be a non-empty dict of signal name to thresholds.", hint, 5)]
    errors = []
    for name, marks in signals.items():
        if name not in KNOWN_SIGNALS:
            errors.append(
                _error(
                    f"QUOTAS['ADAPTIVE']['SIGNALS'] names an unknown signal {name!r}.",
                    f"Known: {', '.join(KNOWN_SIGNALS)}.",
                    5,
                )
            )
            continue
        values = [marks.get(k) for k in ("low", "high", "critical")] if isinstance(marks, dict) else []
        if len(values) != 3 or not all(_number(v) for v in values):
            errors.append(
                _error(f"QUOTAS['ADAPTIVE']['SIGNALS'][{name!r}] needs numbers low, high and critical.", hint, 5)
            )
            continue
        low, high, critical = values
        top = 1 if name in FRACTION_SIGNALS else float("inf")
        if not 0 <= low < high <= critical <= top:
            errors.append(
                _error(
                    f"QUOTAS['ADAPTIVE']['SIGNALS'][{name!r}] needs 0 <= low < high <= critical"
                    + (" <= 1." if top == 1 else "."),
                    "The gap between low and high is the hysteresis band that keeps limits from flapping.",
                    5,
                )
            )
    return errors


def _check_floors(default: Any, floors: Any) -> list:
    errors = []
    if not _number(default) or not 0 < default <= 1:
        errors.append(
            _error(f"QUOTAS['ADAPTIVE']['DEFAULT_FLOOR'] = {default!r} must be in (0, 1].", "Default: 0.1.", 7)
        )
    if not isinstance(floors, dict):
        return [
            *errors,
            _error("QUOTAS['ADAPTIVE']['FLOORS'] must be a dict of plan slug to floor.", "e.g. {'enterprise': 0.8}", 7),
        ]
    for slug, floor in floors.items():
        if not isinstance(slug, str) or not _number(floor) or not 0 < floor <= 1:
            errors.append(
                _error(
                    f"QUOTAS['ADAPTIVE']['FLOORS'][{slug!r}] = {floor!r} must be in (0, 1].",
                    "A plan slug to its floor.",
                    7,
                )
            )
    return errors


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
    if _number(seconds) and _number(interval) and abs(seconds - interval) > 1e-6:
        return [
            Warning(
                f"Beat runs {TASK!r} every {seconds} s but QUOTAS['ADAPTIVE']['INTERVAL'] is {interval} s.",
                hint="Use QUOTAS['ADAPTIVE']['INTERVAL'] as the schedule so the run lock and the checks agree.",
                id="adaptive.W003",
            )
        ]
    return []
