"""System checks of the added signals' settings (adaptive/conf.py, schedule.py, hook.py): targets, the
schedule's times, overlaps, capacities and time zone, and the hook's import path."""

from __future__ import annotations

import pytest

from quotas.checks import check_settings  # QUOTAS['ADAPTIVE'] is checked with QUOTAS
from tests.doc_blocks import doc_block

HOOK_THRESHOLDS = {"low": 0.8, "high": 1.0, "critical": 1.5}
NOT_CALLABLE = "a string"


def project_load() -> float:
    return 0.5


def adaptive(settings, **values) -> None:
    """QUOTAS['ADAPTIVE'] with these keys changed (the settings fixture restores it)."""
    settings.QUOTAS = {**settings.QUOTAS, "ADAPTIVE": {**settings.QUOTAS["ADAPTIVE"], **values}}


def window(start: str = "01:00", end: str = "04:00", capacity: float = 0.5) -> dict:
    return {"start": start, "end": end, "capacity": capacity}


def test_the_added_signals_pass_when_well_set(settings) -> None:
    """latency, errors and hook thresholds above 1 (load figures), a schedule, its zone and a hook."""
    adaptive(
        settings,
        SIGNALS={
            "cpu": {"low": 0.6, "high": 0.8, "critical": 0.95},
            "latency": {"low": 0.8, "high": 1.0, "critical": 2.0},
            "errors": {"low": 0.5, "high": 1.0, "critical": 5.0},
            "hook": HOOK_THRESHOLDS,
        },
        LATENCY_TARGET_MS=300,
        ERROR_RATE_TARGET=0.02,
        MIN_RESPONSES=50,
        SCHEDULE=[window(), window("22:00", "01:00", 0.8), window("12:00", "14:00", 1)],
        SCHEDULE_TIME_ZONE="Europe/Paris",
        LOAD_HOOK=f"{__name__}.project_load",
    )
    assert check_settings() == []


@pytest.mark.parametrize(
    ("override", "expected", "names"),
    [
        ({"LATENCY_TARGET_MS": 0}, "adaptive.E013", "LATENCY_TARGET_MS"),
        ({"ERROR_RATE_TARGET": 1.5}, "adaptive.E014", "ERROR_RATE_TARGET"),
        ({"MIN_RESPONSES": 0}, "adaptive.E015", "MIN_RESPONSES"),
        ({"SCHEDULE": {"start": "01:00"}}, "adaptive.E016", "SCHEDULE"),
        ({"SCHEDULE": [window(start="25:00")]}, "adaptive.E016", "start '25:00'"),
        ({"SCHEDULE": [window(start="1:00")]}, "adaptive.E016", "start '1:00'"),
        ({"SCHEDULE": [window(end="04:60")]}, "adaptive.E016", "end '04:60'"),
        ({"SCHEDULE": [window(start="24:00")]}, "adaptive.E016", "start '24:00'"),
        ({"SCHEDULE": [window(end="01:00")]}, "adaptive.E016", "starts and ends at 01:00"),
        ({"SCHEDULE": [{"start": "01:00", "end": "04:00"}]}, "adaptive.E016", "exactly 'start', 'end' and 'capacity'"),
        ({"SCHEDULE": [window(capacity="half")]}, "adaptive.E016", "capacity 'half'"),
        ({"SCHEDULE": [window(capacity=0)]}, "adaptive.E018", "(01:00-04:00) has capacity 0"),
        ({"SCHEDULE": [window(capacity=1.5)]}, "adaptive.E018", "out of (0, 1]"),
        ({"SCHEDULE": [window(), window("03:00", "05:00")]}, "adaptive.E017", "(01:00-04:00) and"),
        ({"SCHEDULE": [window(), window("23:00", "02:00")]}, "adaptive.E017", "(23:00-02:00) overlap"),
        ({"SCHEDULE_TIME_ZONE": "Mars/Olympus"}, "adaptive.E019", "'Mars/Olympus'"),
        ({"SIGNALS": {"hook": HOOK_THRESHOLDS}, "LOAD_HOOK": "nowhere.load"}, "adaptive.E020", "does not import"),
        ({"SIGNALS": {"hook": HOOK_THRESHOLDS}, "LOAD_HOOK": f"{__name__}.NOT_CALLABLE"}, "adaptive.E020", "callable"),
        ({"LOAD_HOOK": f"{__name__}.project_load"}, "adaptive.W005", "the hook is never called"),
        ({"SIGNALS": {"hook": HOOK_THRESHOLDS}}, "adaptive.W005", "never measured"),
    ],
)
def test_a_bad_added_setting_is_reported(settings, override: dict, expected: str, names: str) -> None:
    """Each bad value is one message with its own id, a message naming what is wrong, and a hint."""
    adaptive(settings, **override)
    (message,) = check_settings()
    assert message.id == expected
    assert names in message.msg
    assert message.hint


def test_windows_that_meet_do_not_overlap(settings) -> None:
    """One window's end is the next one's start: no overlap (the end is not in the window)."""
    adaptive(settings, SCHEDULE=[window("01:00", "04:00"), window("04:00", "06:00", 0.7), window("22:00", "01:00")])
    assert check_settings() == []


def test_the_documented_settings_pass_the_checks(settings) -> None:
    """docs/concepts.md's settings for the added signals, as written, raise nothing but the example hook's
    path, which is the reader's own module (adaptive.E020 names it); with a hook that imports, nothing."""
    namespace: dict = {"QUOTAS": {}}
    exec(doc_block("concepts.md", "adaptive-signals"), namespace)
    documented = namespace["QUOTAS"]["ADAPTIVE"]
    settings.QUOTAS = {**settings.QUOTAS, "ADAPTIVE": documented}
    (message,) = check_settings()
    assert (message.id, documented["LOAD_HOOK"] in message.msg) == ("adaptive.E020", True)
    adaptive(settings, LOAD_HOOK=f"{__name__}.project_load")
    assert check_settings() == []
