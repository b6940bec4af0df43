"""The usage day kept per UTC quarter hour is the day computed afresh, at every minute around local midnights and
DST changes, in zones with whole, half and quarter-hour offsets (a 30-minute DST shift included)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from quotas.formats import periods

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kathmandu", "America/St_Johns", "Australia/Lord_Howe")
#: Moments around which days and offsets change: DST starts and ends of 2026 in the north and the south, and
#: an ordinary midnight.
AROUND = ("2026-03-08", "2026-03-29", "2026-04-05", "2026-10-04", "2026-10-25", "2026-11-01", "2026-11-26")


@pytest.mark.parametrize("zone", ZONES)
def test_the_kept_day_is_the_day_computed_afresh(zone):
    for around in AROUND:
        start = datetime.fromisoformat(around).replace(tzinfo=UTC).timestamp() - 86_400
        for minute in range(0, 2 * 24 * 60, 7):  # two days, every 7 minutes: every quarter hour's edges met
            now = start + minute * 60 + 0.5
            assert periods.usage_day(now, zone) == periods._usage_day(now, zone), (zone, now)
            assert periods.usage_day(now + 59, zone) == periods._usage_day(now + 59, zone), (zone, now + 59)


def test_a_second_zone_is_not_served_the_first_ones_day():
    now = datetime(2026, 11, 26, 23, 30, tzinfo=UTC).timestamp()
    assert periods.usage_day(now, "UTC").stamp == "20261126"
    assert periods.usage_day(now, "Asia/Kathmandu").stamp == "20261127"
    assert periods.usage_day(now, "UTC").stamp == "20261126"
