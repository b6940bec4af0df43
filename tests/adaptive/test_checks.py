"""System checks for QUOTAS['ADAPTIVE'] name the bad setting and how to fix it (adaptive/checks.py)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from adaptive.checks import check_beat_schedule, check_settings
from adaptive.conf import DEFAULTS, adaptive_settings


def ids(messages: list) -> list[str]:
    return sorted(m.id for m in messages)


def test_project_settings_pass() -> None:
    """The project's settings (and the defaults) raise nothing."""
    assert check_settings() == []
    assert check_beat_schedule() == []


def adaptive(settings, **values) -> None:
    """QUOTAS['ADAPTIVE'] with these keys changed (the settings fixture restores it)."""
    settings.QUOTAS = {**settings.QUOTAS, "ADAPTIVE": {**settings.QUOTAS["ADAPTIVE"], **values}}


def test_settings_are_read_at_access_time(settings) -> None:
    """No value is captured at import: override_settings is seen at once, defaults fill the rest."""
    settings.QUOTAS = {**settings.QUOTAS, "ADAPTIVE": {"INTERVAL": 2.0}}
    assert adaptive_settings.INTERVAL == 2.0
    assert DEFAULTS["SIGNALS"] == adaptive_settings.SIGNALS
    settings.QUOTAS = {k: v for k, v in settings.QUOTAS.items() if k != "ADAPTIVE"}
    assert DEFAULTS["INTERVAL"] == adaptive_settings.INTERVAL
    assert not hasattr(settings, "ADAPTIVE")  # nothing is written into django.conf.settings
    with pytest.raises(AttributeError):
        adaptive_settings.NOPE  # noqa: B018


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"INTERVAL": 0}, "adaptive.E002"),
        ({"FAST_SECONDS": -1}, "adaptive.E002"),
        ({"SAMPLE_TTL": "5"}, "adaptive.E002"),
        ({"REPORT_INTERVAL": 0.2}, "adaptive.E003"),
        ({"REPORT_INTERVAL": 5.0, "SAMPLE_TTL": 5.0}, "adaptive.E004"),
        ({"SIGNALS": {}}, "adaptive.E005"),
        ({"SIGNALS": {"gpu": {"low": 0.1, "high": 0.2, "critical": 0.3}}}, "adaptive.E005"),
        ({"SIGNALS": {"cpu": {"low": 0.8, "high": 0.6, "critical": 0.9}}}, "adaptive.E005"),
        ({"SIGNALS": {"cpu": {"low": 0.6, "high": 0.8, "critical": 1.5}}}, "adaptive.E005"),
        ({"SIGNALS": {"cpu": {"low": 0.6, "high": 0.8}}}, "adaptive.E005"),
        ({"DECREASE_FACTOR": 1.0}, "adaptive.E006"),
        ({"RECOVERY_RATE": 0}, "adaptive.E006"),
        ({"MIN_LEVEL": 0}, "adaptive.E006"),
        ({"DEFAULT_FLOOR": 0}, "adaptive.E007"),
        ({"FLOORS": {"enterprise": 1.2}}, "adaptive.E007"),
        ({"FLOORS": ["enterprise"]}, "adaptive.E007"),
        ({"AGGREGATE": "median"}, "adaptive.E008"),
        ({"RETENTION_DAYS": 0}, "adaptive.E009"),
        ({"ENABLED": "yes"}, "adaptive.E010"),
        ({"PUBLISH_TTL": 6.0}, "adaptive.E011"),
        ({"INTERVALL": 5}, "adaptive.W001"),
    ],
)
def test_bad_setting_is_reported(settings, override: dict, expected: str) -> None:
    """Each bad value is reported with its own id and a hint."""
    adaptive(settings, **override)
    messages = check_settings()
    assert ids(messages) == [expected]
    assert messages[0].hint


def test_not_a_dict(settings) -> None:
    settings.QUOTAS = {**settings.QUOTAS, "ADAPTIVE": ["INTERVAL", 5]}
    (error,) = check_settings()
    assert error.id == "adaptive.E001"
    assert "QUOTAS['ADAPTIVE']" in error.msg
    assert DEFAULTS["INTERVAL"] == adaptive_settings.INTERVAL  # still readable: the check says what is wrong


def test_redis_latency_signal_may_be_milliseconds(settings) -> None:
    """redis_ms thresholds are milliseconds, not fractions."""
    signals = {**DEFAULTS["SIGNALS"], "redis_ms": {"low": 5, "high": 20, "critical": 100}}
    adaptive(settings, SIGNALS=signals)
    assert check_settings() == []


def test_unknown_setting_suggests_the_name(settings) -> None:
    adaptive(settings, INTERVALL=5)
    (warning,) = check_settings()
    assert warning.msg == "Unknown setting QUOTAS['ADAPTIVE']['INTERVALL'] is ignored."
    assert warning.hint == "Did you mean 'INTERVAL'?"


def test_beat_schedule_must_run_the_controller_as_often_as_configured(settings) -> None:
    """A missing beat entry is W002; a schedule that differs from INTERVAL is W003."""
    schedule = dict(settings.CELERY_BEAT_SCHEDULE)
    settings.CELERY_BEAT_SCHEDULE = {k: v for k, v in schedule.items() if v["task"] != "adaptive.control"}
    assert ids(check_beat_schedule()) == ["adaptive.W002"]
    settings.CELERY_BEAT_SCHEDULE = {**schedule, "adaptive-control": {"task": "adaptive.control", "schedule": 30.0}}
    assert ids(check_beat_schedule()) == ["adaptive.W003"]


def test_errors_stop_manage_py(settings) -> None:
    """An error fails `manage.py check` like any other system check."""
    adaptive(settings, AGGREGATE="median")
    with pytest.raises(SystemCheckError, match=r"adaptive\.E008"):
        call_command("check")
