"""Values read at a glance: durations, money in its currency's decimals, times in the viewer's zone (UTC on hover)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from dashboard.templatetags.glance import format_duration, in_duration, local_time, money, per_window
from quotas.formats.money import format_money, minor_units


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (42987, "11 h 56 min"),  # 11 h 56 min 27 s: the two largest units, as a clock shows them
        (42, "42 s"),
        (0.2, "1 s"),  # rounded up: "in 0 s" would read as now
        (65, "1 min 5 s"),
        (3600, "1 h"),
        (3 * 86400 + 4 * 3600 + 59, "3 d 4 h"),
    ],
)
def test_durations_read_in_their_two_largest_units(seconds, text):
    assert format_duration(seconds) == text


def test_in_duration_says_now_when_nothing_is_left_and_leaves_odd_values_alone():
    assert in_duration(42960) == "in 11 h 56 min"
    assert in_duration(0) == "now"
    assert in_duration("n/a") == "n/a"


@pytest.mark.parametrize(
    ("amount", "currency", "text"),
    [
        ("0.000000", "USD", "0.00 USD"),
        ("1234.5", "USD", "1,234.50 USD"),
        ("1234.5", "JPY", "1,235 JPY"),
        ("1.2345", "KWD", "1.235 KWD"),
        ("0.001000", "USD", "0.001 USD"),  # a tenth of a cent is not nothing
        ("0.000001", "EUR", "0.000001 EUR"),
        ("12.5", "", "12.50"),
        (Decimal("-3.456"), "usd", "-3.46 USD"),
    ],
)
def test_money_has_its_currencys_usual_decimals(amount, currency, text):
    assert format_money(amount, currency) == text


def test_minor_units_follow_iso_4217():
    assert (minor_units("USD"), minor_units("JPY"), minor_units("BHD"), minor_units("XYZ")) == (2, 0, 3, 2)
    assert money("oops", "USD") == "oops"


def test_local_time_is_a_time_element_in_utc_that_the_browser_rewrites():
    when = datetime(2026, 11, 23, 14, 5, 9, tzinfo=timezone(timedelta(hours=2)))
    html = local_time(when)
    assert html == (
        '<time datetime="2026-11-23T12:05:09+00:00" title="2026-11-23 12:05:09 UTC" data-local>'
        "2026-11-23 12:05:09 UTC</time>"
    )
    assert local_time("2026-11-23T12:05:09+00:00") == html
    assert local_time(None) == "—"
    assert local_time("not a time") == "not a time"
    assert "UTC" in local_time(datetime(2026, 1, 1, tzinfo=UTC))


def test_micro_units_read_as_money():
    from dashboard.templatetags.glance import micros

    assert micros(12_345_678, "USD") == "12.35 USD"
    assert micros("x", "USD") == "x"


def test_windows_read_as_named_units():
    assert [per_window(w) for w in (1, 60, 3600, 86400, 30, 7200, "x")] == [
        "second", "minute", "hour", "day", "30 s", "2 h", "x",
    ]  # fmt: skip
