"""Usage days begin where budget days begin (``BUDGET_TIME_ZONE``), so a day of usage is a day of budget.

Before, usage was dated by UTC day: with a New York budget of 1.00 a day and 0.90 spent on each of two New York
days that fall in one UTC day, the customer saw one usage row of 1.80 on a day whose budget is 1.00.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from plans.models import CostBudget
from quotas.engine import default_engine
from quotas.formats.money import to_micros
from quotas.formats.periods import usage_day
from quotas.internal_api import hash_api_key
from quotas.store.decision import DecideCall
from quotas.store.usage_hash_format import scan_usage_keys
from quotas.testing import use_clock
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.host_clock import HostClock
from usage.flush import flush_usage
from usage.models import UsageRecord

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

NEW_YORK = ZoneInfo("America/New_York")


@pytest.fixture
def metered(db, set_quotas):
    """A plan priced 0.30 a request on the priced scope, with a budget of 1.00 a day."""
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.30"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1.00"))
    return plan


def other_date_zone(now: datetime) -> str:
    """A time zone whose date differs from the UTC date at ``now`` (UTC-12 before noon UTC, UTC+14 after)."""
    return "Etc/GMT+12" if now.hour < 12 else "Etc/GMT-14"


def report(api, key, **params):
    response = api.get("/api/v1/usage/", params, HTTP_X_API_KEY=key)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_day_of_usage_is_the_budget_zones_day_live_and_flushed(api, metered, set_quotas, redis_client):
    """Three requests at 0.30 through DRF: the usage API's row is dated by the budget zone's today (not the UTC
    date, which differs here), its cost is what /current says was spent of today's budget, before and after
    the flush."""
    seconds, _ = redis_client.time()
    now = datetime.fromtimestamp(seconds, UTC)
    zone = other_date_zone(now)
    set_quotas(BUDGET_TIME_ZONE=zone)
    local_today = now.astimezone(ZoneInfo(zone)).date()
    assert local_today != now.date()
    key = issue_key(plan=metered)
    codes = [api.get("/t/priced", HTTP_X_API_KEY=key).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]  # 0.90 spent; a fourth 0.30 would pass the 1.00 budget
    runtime = default_engine.runtime()
    runtime.guard.usage.flush_usage()
    assert list(scan_usage_keys(redis_client, runtime.prefix, [now.date()])) == []  # no key of the UTC date
    live = report(api, key, to=local_today.isoformat())
    ((row,),) = [live["rows"]]
    assert (row["day"], row["allowed"], Decimal(row["cost"])) == (local_today.isoformat(), 3, Decimal("0.90"))
    current = api.get("/api/v1/usage/current", HTTP_X_API_KEY=key).json()
    (budget,) = current["budgets"]
    assert Decimal(budget["spent"]) == Decimal(row["cost"])
    assert report(api, key)["rows"] == live["rows"]  # the default last day is the zone's today too
    flush_usage()
    (record,) = UsageRecord.objects.filter(scope="priced")
    assert (record.day, record.allowed, record.cost) == (local_today, 3, Decimal("0.90"))
    assert report(api, key, to=local_today.isoformat())["rows"] == live["rows"]


def test_two_new_york_days_in_one_utc_day_are_two_days_of_usage(api, metered, set_quotas, redis_client):
    """0.90 spent on each of two New York days that lie in one UTC day (20:00 and 10:00 the next morning, New
    York time): both admitted by the 1.00 daily budget, and reported as two days of 0.90, not one of 1.80."""
    set_quotas(BUDGET_TIME_ZONE="America/New_York")
    key = issue_key(plan=metered)
    runtime = default_engine.runtime()
    sub = runtime.rules.subscriber_for_key(hash_api_key(key))
    tag = f"{{s.{sub.id}}}"
    windows = [w for rule in runtime.rules.current().limits_for(sub.plan_id, sub) for w in rule.windows]
    # Yesterday and the day before, New York time: recent enough that their usage keys still live.
    seconds, _ = redis_client.time()
    ny_today = datetime.fromtimestamp(seconds, NEW_YORK).date()
    evening = datetime.combine(ny_today - timedelta(days=2), datetime.min.time(), NEW_YORK).replace(hour=20)
    morning = evening + timedelta(hours=14)  # 10:00 the next New York day
    assert evening.astimezone(UTC).date() == morning.astimezone(UTC).date()  # one UTC day
    for at in (evening, morning):
        for _ in range(3):
            decision = runtime.guard.decide(
                tag, windows, now=at.timestamp(), cost_micros=to_micros(Decimal("0.30")), usage=f"{sub.plan_id}|priced"
            )
            assert decision.allowed
    # Then today's 0.30 (after the earlier days: a period's state is never replaced by an earlier one's).
    assert api.get("/t/priced", HTTP_X_API_KEY=key).status_code == 200
    flush_usage()
    days = {
        r["day"]: Decimal(r["cost"])
        for r in report(api, key, **{"from": (ny_today - timedelta(days=3)).isoformat()})["rows"]
    }
    assert days == {
        evening.date().isoformat(): Decimal("0.90"),
        morning.date().isoformat(): Decimal("0.90"),
        ny_today.isoformat(): Decimal("0.30"),
    }


@pytest.mark.parametrize(
    ("zone", "instant", "expected"),
    [
        ("America/New_York", "2026-03-08T04:59:59.999999+00:00", date(2026, 3, 7)),  # 23:59:59.999999 EST
        ("America/New_York", "2026-03-08T05:00:00+00:00", date(2026, 3, 8)),
        ("America/New_York", "2026-11-01T03:59:59+00:00", date(2026, 10, 31)),  # EDT, the night before it ends
        ("Pacific/Kiritimati", "2026-01-01T10:00:00+00:00", date(2026, 1, 2)),
        ("America/Santiago", "2026-09-06T04:00:00+00:00", date(2026, 9, 6)),  # midnight skipped: 01:00 CLST
        ("UTC", "2026-11-26T23:59:59+00:00", date(2026, 11, 26)),
    ],
)
def test_the_usage_day_of_an_instant(zone, instant, expected):
    """The usage day is the zone's date, across DST changes (Santiago's begins at midnight, which it skips),
    and its index is what the scripts compute from the Redis clock with the offset sent."""
    moment = datetime.fromisoformat(instant)
    day = usage_day(moment.timestamp(), zone)
    assert day.date == expected
    assert day.stamp == expected.strftime("%Y%m%d")
    assert day.days == (expected - date(1970, 1, 1)).days
    assert day.days == int((moment.timestamp() + day.offset) // 86400)


@pytest.mark.parametrize("skew", [0.005, 3.0], ids=["5ms", "3s"])
def test_a_host_ahead_of_redis_at_the_zones_midnight_counts_in_redis_day(metered, set_quotas, redis_client, skew):
    """The host thinks the budget zone's next day began ``skew`` seconds ago; for Redis it has not: the
    script dates the usage by its own clock, with the zone's offset the host sent, into today's key."""
    now = time.time()
    zone = other_date_zone(datetime.fromtimestamp(now, UTC))  # its date is not the UTC date
    set_quotas(BUDGET_TIME_ZONE=zone)
    today = usage_day(now, zone)
    tomorrow = datetime.combine(today.date + timedelta(days=1), datetime.min.time(), ZoneInfo(zone))
    with use_clock(HostClock(tomorrow.timestamp() + skew - now)):  # not injected: Redis's clock decides
        runtime = default_engine.runtime()
        assert runtime.guard.decide_call(DecideCall("{s.9}", (), usage="1|-")).allowed
    keys = list(scan_usage_keys(redis_client, runtime.prefix, [today.date, today.date + timedelta(days=1)]))
    assert [k.rsplit(":", 1)[1] for k in keys] == [today.stamp]
