"""The adaptive app's system checks (adaptive/checks.py): bad settings, a missing [adaptive] extra or load reporter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from adaptive.checks import LOAD_REPORTER, check_beat_schedule, check_extra, check_load_reporter
from adaptive.conf import DEFAULTS, adaptive_settings
from adaptive.middleware import LoadReporterMiddleware
from quotas.checks import check_settings  # QUOTAS['ADAPTIVE'] is checked with QUOTAS

ROOT = Path(__file__).resolve().parents[2]


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
        ({"MODE": "on"}, "adaptive.E021"),
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


class LoadReporterSubclass(LoadReporterMiddleware):
    """A project's own load reporter, under another import path."""


def test_the_extra_and_the_load_reporter_are_there(set_quotas) -> None:
    """The project installs celery and psutil and lists LoadReporterMiddleware."""
    set_quotas("ADAPTIVE", REPORT_INTERVAL=1.0)  # the test session turns reporting off
    assert check_extra() == []
    assert check_load_reporter() == []


@pytest.mark.parametrize("missing", [("celery",), ("psutil",), ("celery", "psutil")])
def test_a_missing_extra_is_an_error_naming_it(monkeypatch, missing) -> None:
    """adaptive.E012 names the modules that cannot be imported and the extra that installs them."""
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)  # the import system's own "not installed" marker

    (error,) = check_extra()

    assert error.id == "adaptive.E012"
    assert f"needs {' and '.join(missing)}, which cannot be imported" in error.msg
    assert error.hint == 'Install the [adaptive] extra: pip install "django-quota-platform[adaptive]".'


def test_without_the_load_reporter_this_process_reports_no_load(settings, set_quotas) -> None:
    """No LoadReporterMiddleware in MIDDLEWARE is adaptive.W004; a subclass of it counts, and so does reporting
    turned off on purpose (REPORT_INTERVAL = 0, where the middleware would do nothing)."""
    set_quotas("ADAPTIVE", REPORT_INTERVAL=1.0)
    project = list(settings.MIDDLEWARE)
    settings.MIDDLEWARE = [m for m in project if m != LOAD_REPORTER]

    (warning,) = check_load_reporter()

    assert warning.id == "adaptive.W004"
    assert "adaptive limits will see no load from this process" in warning.msg
    assert LOAD_REPORTER in warning.hint
    set_quotas("ADAPTIVE", REPORT_INTERVAL=0)
    assert check_load_reporter() == []
    set_quotas("ADAPTIVE", REPORT_INTERVAL=1.0)
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}.LoadReporterSubclass"]
    assert check_load_reporter() == []


@pytest.mark.slow  # a real Python process
def test_without_psutil_manage_py_names_the_extra() -> None:
    """Without psutil the app still loads (its load reporter is not imported), so `manage.py check` stops on
    adaptive.E012 with the extra to install instead of a ModuleNotFoundError."""
    code = (
        "import sys; sys.modules['psutil'] = None\n"  # as if it were not installed
        "from django.core.management import execute_from_command_line\n"
        "execute_from_command_line(['manage.py', 'check'])\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=60, check=False)

    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "(adaptive.E012) The adaptive app needs psutil" in err
    assert "ModuleNotFoundError" not in err
