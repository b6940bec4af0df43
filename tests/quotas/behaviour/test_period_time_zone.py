"""A change of ``BUDGET_TIME_ZONE`` within a period keeps what the period spent.

A period is named by its end. Moving the zone west makes the current period end later than the state stored under
the old zone: that state lies in the second half of the new period, so it is the same period seen from another
zone and its spend and alert level carry over (they used to be dropped: a 1.00 month could spend 1.80, each alert
sent twice). Moving east makes the period end earlier: the stored, later period wins until the new zone's period
ends, then the next one starts afresh. Times are given explicitly (November 2026, when New York is UTC-5).
"""

from __future__ import annotations

from datetime import UTC, datetime

from quotas.engine import default_engine
from quotas.formats.rates import Rate
from quotas.rules.limits import LimitRule
from quotas.store.decision import Decision
from quotas.testing import ManualClock, use_clock

BUDGET = LimitRule(id="b", name="month-budget", rates=(Rate(100, 86400),), algorithm="budget", period="month")
TAG = "{s.tz}"


def at(day: int, hour: int, month: int = 11) -> float:
    """A moment of 2026 in UTC, as epoch seconds."""
    return datetime(2026, month, day, hour, tzinfo=UTC).timestamp()


def spend(runtime, cost: int, now: float | None):
    """Ask for ``cost`` micro-units of the month budget at ``now``; the budget's state after it. (A settings
    change rebuilds the engine on the same store: the current one decides.)"""
    decision = default_engine.runtime().guard.decide(TAG, BUDGET.windows, cost_micros=cost, now=now)
    return decision.allowed, decision.states[0]


def test_moving_the_zone_west_keeps_the_months_spend(runtime, set_quotas):
    """90 of 100 spent in the UTC month; the zone moves to New York (the month now ends 5 hours later): 20 more
    are refused, 10 admitted, and the 80 % alert is not reported again, the 100 % once."""
    allowed, state = spend(runtime, 90, at(20, 12))
    assert allowed
    assert state.alert == 1
    set_quotas(BUDGET_TIME_ZONE="America/New_York")
    allowed, state = spend(runtime, 20, at(20, 13))
    assert not allowed
    assert state.used == 90
    assert state.alert == 2  # the budget is spent for this period (reported once, at the first refusal)
    allowed, state = spend(runtime, 10, at(20, 14))
    assert allowed
    assert state.used == 100
    assert state.alert == 0
    assert state.reset_us == (at(1, 5, month=12) - at(20, 14)) * 1_000_000  # the New York month's end
    allowed, state = spend(runtime, 10, at(1, 6, month=12))  # New York's December: afresh
    assert allowed
    assert state.used == 10


def test_moving_the_zone_west_in_the_hours_between_the_two_ends_keeps_the_spend(runtime, set_quotas):
    """Spent in the UTC November; the next request comes at 02:00 UTC on 1 December, still November in New York:
    the November spend is there."""
    assert spend(runtime, 90, at(30, 12))[0]
    set_quotas(BUDGET_TIME_ZONE="America/New_York")
    allowed, state = spend(runtime, 20, at(1, 2, month=12))
    assert not allowed
    assert state.used == 90


def test_moving_the_zone_east_keeps_the_spend_until_the_new_zones_period_ends(runtime, set_quotas):
    """90 spent in New York's November; the zone moves to UTC: the stored month, ending later, still counts
    until the UTC month ends; December in UTC starts afresh, not with November's spend."""
    set_quotas(BUDGET_TIME_ZONE="America/New_York")
    assert spend(runtime, 90, at(20, 12))[0]
    set_quotas(BUDGET_TIME_ZONE="UTC")
    allowed, state = spend(runtime, 20, at(30, 12))
    assert not allowed
    assert state.used == 90
    allowed, state = spend(runtime, 20, at(1, 1, month=12))
    assert allowed
    assert state.used == 20


def test_a_later_period_is_never_replaced_by_an_earlier_one(runtime):
    """The previous month's spend never counts in this one, however close to its end it was spent."""
    assert spend(runtime, 90, at(30, 23))[0]
    allowed, state = spend(runtime, 90, at(1, 1, month=12))
    assert allowed
    assert state.used == 90


def test_a_late_charge_lands_in_its_own_period_even_before_redis_counted_it(runtime):
    """Spend Redis did not see (the local fallback's, charged once Redis answers: quotas/store/money/owed.py) in a month
    whose state Redis has not started yet, the last month's being stored: it lands in its own month, and a charge
    for a month that has since ended leaves the later one alone."""
    assert spend(runtime, 90, at(30, 12))[0]
    store, december = default_engine.runtime().guard.store, at(1, 12, month=12)
    late = Decision(True, [], december, tag=TAG)
    [budget] = store.adjust(late, 40, [BUDGET.windows[0].spec_at(december)], in_usage=False)
    assert (budget.used, budget.alert) == (40, 0)
    november = Decision(True, [], at(30, 13), tag=TAG)
    [ended] = store.adjust(november, 40, [BUDGET.windows[0].spec_at(november.now)], in_usage=False)
    assert ended.period_ended
    assert spend(runtime, 0, at(1, 13, month=12))[1].used == 40


DAY_BUDGET = LimitRule(id="d", name="day-budget", rates=(Rate(100, 86400),), algorithm="budget", period="day")


def test_a_settlement_lands_in_the_period_its_decision_counted_in_after_the_zone_moved_east(runtime, set_quotas):
    """10 spent in New York's 20 November (it ends at 05:00 UTC on the 21st); the zone moves to Tokyo, whose
    20 November ends 14 hours earlier. The next request is counted in the stored New York day, which has not
    ended, and is settled at 30 for its estimate of 10: the 20 more land in that same day (they used to be
    dropped as a later period's, so the day held 20 where 40 were spent)."""
    set_quotas(BUDGET_TIME_ZONE="America/New_York")
    guard = default_engine.runtime().guard
    assert guard.decide(TAG, DAY_BUDGET.windows, cost_micros=10, now=at(20, 12)).allowed
    set_quotas(BUDGET_TIME_ZONE="Asia/Tokyo")
    guard = default_engine.runtime().guard
    decision = guard.decide(TAG, DAY_BUDGET.windows, cost_micros=10, now=at(20, 13))
    assert decision.allowed
    assert decision.states[0].used == 20
    guard.settlement.reconcile(decision, 30)
    assert decision.states[0].used == 40
    after = guard.decide(TAG, DAY_BUDGET.windows, cost_micros=0, now=at(20, 14)).states[0]
    assert after.used == 40


QUOTA = LimitRule(id="q", name="day-quota", rates=(Rate(6, 86400),), algorithm="period_requests", period="day")


def another_client_decides() -> None:
    """A request of another client of the same bucket (KEY_BUCKETS=1) at a whole second: the script then sweeps
    the bucket of its clients' fields past their expiry (bucket.lua's maybe_sweep, one write in 64 microseconds),
    as a busy bucket's writes do every few seconds in production."""
    assert default_engine.runtime().guard.decide("{s.other}", QUOTA.windows).allowed


def test_a_carried_months_spend_outlives_the_old_zones_end(runtime, set_quotas):
    """90 spent in the UTC November, then the zone moves to New York, whose November ends 5 hours after UTC's: at
    04:59:59 UTC on 1 December (still November in New York) the 90 are there, on the engine's clock (the memory
    store's keys expire by it) after another client's write swept the bucket. The state used to live only until
    the UTC month's end (and a minute): the bucket's key expired, or a sweep removed its fields, and the month
    started afresh five hours early (0.01 spent read as 0 by the money machine)."""
    set_quotas(KEY_BUCKETS=1)
    with use_clock(ManualClock(at(20, 12))) as clock:
        assert spend(runtime, 90, None)[0]
        set_quotas(BUDGET_TIME_ZONE="America/New_York")
        clock.set(at(1, 5, month=12) - 1)
        another_client_decides()
        allowed, state = spend(runtime, 20, None)
        assert not allowed
        assert state.used == 90


def test_a_carried_days_requests_outlive_the_old_zones_end(runtime, set_quotas):
    """2 of 6 requests in Tokyo's 20 November (it ends at 15:00 UTC), then the zone moves to UTC, 9 hours west: at
    23:59:59 UTC the 2 still count (the next request leaves 3, not 5)."""
    set_quotas(KEY_BUCKETS=1, BUDGET_TIME_ZONE="Asia/Tokyo")
    with use_clock(ManualClock(at(20, 12))) as clock:
        guard = default_engine.runtime().guard
        assert all(guard.decide(TAG, QUOTA.windows).allowed for _ in range(2))
        set_quotas(BUDGET_TIME_ZONE="UTC")
        clock.set(at(21, 0) - 1)
        another_client_decides()
        decision = default_engine.runtime().guard.decide(TAG, QUOTA.windows)
        assert decision.allowed
        assert decision.states[0].remaining == 3
