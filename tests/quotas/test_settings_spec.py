"""Settings described as data: the descriptions are sound, and a Setting checks and words values as it says."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from quotas.settings import DEFAULTS, SECTIONS, Setting, markdown_table, quota_settings
from quotas.settings.registry import registered
from quotas.settings.spec import SETTINGS

#: The engine's settings and sections, and the section each app registered (all are installed here).
DESCRIBED = {
    "QUOTAS": (*SETTINGS, *(s.setting for s in registered())),
    **{f"QUOTAS[{s.name!r}]": s.keys for s in (*SETTINGS, *(s.setting for s in registered())) if s.keys},
}


@pytest.mark.parametrize("label", sorted(DESCRIBED))
def test_every_description_is_sound(label):
    """Names unique and upper case, ids of the app's form, one-line docs and hints, and every default valid."""
    described = DESCRIBED[label]
    assert len({s.name for s in described}) == len(described)
    for s in described:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", s.name)
        assert re.fullmatch(r"(quotas|adaptive|notifications|quota_plans|quota_console)\.E\d{3}", s.check_id), s.name
        assert s.doc, s.name
        assert s.hint, s.name
        assert "\n" not in s.doc + s.hint, s.name
        assert s.check(s.default, f"{label}[{s.name!r}]") == [], s.name


def test_quota_settings_read_the_description():
    """The defaults quota_settings falls back to are the described ones, a section's are its keys'."""
    assert {s.name: s.default for s in SETTINGS} == DEFAULTS
    assert set(SECTIONS) == {"METRICS", "USAGE_FLUSH", "RETENTION", "ALLOWANCES"}
    assert quota_settings.USAGE_FLUSH == {"BATCH_SIZE": 500, "BATCH_DELAY": 0.0}


def test_a_value_read_once_is_read_again_when_quotas_changes(settings):
    """quota_settings keeps what it read until Django says QUOTAS changed (override_settings, the settings
    fixture): never a stale value, and not settings.QUOTAS again on every request."""
    settings.QUOTAS = {**settings.QUOTAS, "API_KEY_HEADER": "X-First"}
    assert quota_settings.API_KEY_HEADER == "X-First"
    assert "API_KEY_HEADER" in vars(quota_settings)  # kept: the next read does not look in settings.QUOTAS
    settings.QUOTAS = {**settings.QUOTAS, "API_KEY_HEADER": "X-Second"}
    assert quota_settings.API_KEY_HEADER == "X-Second"
    settings.QUOTAS = {}
    assert quota_settings.API_KEY_HEADER == "X-API-Key"  # the default


def seconds(**bounds) -> Setting:
    return Setting("T", float, 1.0, doc="d", check_id="quotas.E005", hint="h", kind="a number of seconds", **bounds)


@pytest.mark.parametrize(
    ("bounds", "words"),
    [
        ({"minimum": 0}, ">= 0"),
        ({"exclusive_minimum": 0}, "> 0"),
        ({"minimum": 1, "maximum": 1 << 24}, "from 1 to 16_777_216"),
        ({"exclusive_minimum": 0, "maximum": 1}, "in (0, 1]"),
        ({"exclusive_minimum": 0, "exclusive_maximum": 1}, "in (0, 1)"),
        ({"maximum": 9}, "<= 9"),
        ({}, ""),
    ],
)
def test_bounds_are_worded_as_checked(bounds, words):
    assert seconds(**bounds).bounds() == words
    assert seconds(**bounds).expected() == f"a number of seconds {words}".strip()


@pytest.mark.parametrize(
    ("value", "admitted"),
    [(0, True), (0.5, True), (1, True), (1.5, False), (-0.1, False), (True, False), ("0.5", False)],
)
def test_a_number_is_an_int_or_a_float_never_a_bool(value, admitted):
    assert seconds(minimum=0, maximum=1).admits(value) is admitted


def test_nan_is_outside_every_range():
    assert not seconds(minimum=0).admits(float("nan"))


def test_unions_and_none():
    amount = Setting("A", int | Decimal | str | None, 1, doc="d", check_id="quotas.E017", hint="h")
    assert all(amount.admits(v) for v in (Decimal("1.5"), "2", None))
    assert not amount.admits(1.5)
    assert amount.expected() == "an int or a Decimal or a string or None"


def test_a_bad_value_is_one_error_with_the_setting_id_and_its_hint():
    (error,) = seconds(minimum=0).check(-1, "QUOTAS['T']")
    assert error.id == "quotas.E005"
    assert error.msg == "QUOTAS['T'] = -1 must be a number of seconds >= 0."
    assert error.hint == "h Default: 1.0."


def test_a_secret_is_never_repeated():
    token = Setting("TOKEN", str, "", doc="d", check_id="quotas.E035", hint="h", secret=True)
    (error,) = token.check(b"s3cret", "QUOTAS['METRICS']['TOKEN']")
    assert error.msg == "QUOTAS['METRICS']['TOKEN'] must be a string."


def test_a_validator_runs_once_the_type_is_right():
    """Its strings become errors with the setting's id; a message of its own keeps its id."""
    seen = []

    def even(value, label):
        seen.append(value)
        if value % 2:
            yield f"{label} = {value!r} is odd."

    setting = Setting("N", int, 2, doc="d", check_id="quotas.E099", hint="h", validate=even)
    assert setting.check("3", "N")[0].msg == "N = '3' must be an int."
    assert seen == []
    (error,) = setting.check(3, "N")
    assert (error.id, error.msg) == ("quotas.E099", "N = 3 is odd.")


def test_the_markdown_table_has_a_row_per_setting():
    table = markdown_table(SETTINGS)
    assert table.splitlines()[0] == "| setting | default | meaning | check |"
    assert len(table.splitlines()) == 2 + len(SETTINGS)
    assert "| `METRICS` | see below |" in table
