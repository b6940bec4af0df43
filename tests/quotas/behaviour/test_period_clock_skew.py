"""A calendar period is decided by Redis's clock, whatever the application hosts' clocks say.

Each host computes the period that holds its own clock and sends its bounds; the script picks the period that
holds the server's clock (the previous one, while a host ahead of Redis already sends the next day's bounds)
and never replaces a period's state with an earlier period's. Here one host runs ahead of Redis across a day's
end and another behind it, by a few milliseconds and by a few seconds, against a real redis-server: what they
admit together in one day is never more than the day's quota.
"""

from __future__ import annotations

import time

import pytest

from quotas.engine import default_engine
from quotas.formats.rates import Rate
from quotas.rules.limits import LimitRule
from quotas.store.decision import DecideCall
from quotas.testing import use_clock
from tests.host_clock import HostClock

DAY = 86_400
QUOTA = 100
WINDOWS = LimitRule(id="p", name="daily", rates=(Rate(QUOTA, DAY),), algorithm="period_requests", period="day").windows
TAG = "{s.1}"


@pytest.fixture
def host_clock(runtime):
    """Set the application host's clock to ``offset`` seconds from the real one (Redis keeps the real one): the
    engine runs on a :class:`HostClock`, not injected, so the decisions keep the server's clock."""
    clock = HostClock()
    with use_clock(clock):

        def set_offset(offset: float) -> None:
            clock.offset = offset

        yield set_offset


def spend(requests: int) -> int:
    """Ask for ``requests`` requests one at a time, as the server's clock decides; returns how many were admitted."""
    guard = default_engine.runtime().guard
    return sum(guard.decide_call(DecideCall(TAG, WINDOWS)).allowed for _ in range(requests))


@pytest.mark.parametrize("skew", [0.005, 3.0], ids=["5ms", "3s"])
def test_a_host_ahead_of_redis_across_midnight_spends_the_same_day(runtime, host_clock, skew):
    """The host thinks a new UTC day began ``skew`` seconds ago; for Redis the day is not over. The 30 it
    admits count in Redis's day, so a host with the right clock admits only the 70 left, not another 100."""
    now = time.time()
    next_midnight = (now // DAY + 1) * DAY
    host_clock(next_midnight + skew - now)  # this host: just past midnight
    assert spend(30) == 30
    host_clock(0.0)  # a host whose clock agrees with Redis
    assert spend(100) == QUOTA - 30
    host_clock(next_midnight + skew - now)
    assert spend(5) == 0  # the day is spent, whichever host asks


@pytest.mark.parametrize("skew", [0.005, 3.0], ids=["5ms", "3s"])
def test_a_host_behind_redis_across_midnight_spends_the_same_day(runtime, host_clock, skew):
    """The host still thinks yesterday has ``skew`` seconds left; for Redis it is today. Its requests count in
    Redis's day, with a host whose clock is right: 100 in all, never 100 each."""
    now = time.time()
    last_midnight = now // DAY * DAY
    host_clock(last_midnight - skew - now)  # this host: just before midnight
    assert spend(40) == 40
    host_clock(0.0)
    assert spend(100) == QUOTA - 40
    host_clock(last_midnight - skew - now)
    assert spend(5) == 0


def test_a_later_periods_state_is_never_replaced_by_an_earlier_ones(runtime, redis_client):
    """A state written for a later period (a server whose clock ran ahead, then a failover to one behind) is
    counted in, not overwritten: the requests still count against that later period."""
    assert spend(10) == 10
    keys = runtime.store.keys_of(TAG)
    field = keys.field(WINDOWS[0].state_field)
    end, used, *rest = redis_client.hget(keys.bucket, field).decode().split(":")
    later = ":".join([str(int(end) + DAY * 1_000_000), used, *rest])
    redis_client.hset(keys.bucket, field, later)
    assert spend(5) == 5
    assert redis_client.hget(keys.bucket, field).decode().split(":")[:2] == [later.split(":")[0], "15"]
