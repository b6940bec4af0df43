"""The engine on an injected clock: a test moves time and every part moves with it, the production path included.

With ``quota_clock`` the whole engine reads one clock: the decisions (the script is sent its time, on a Redis and
on the memory store alike), the allowances and the memory of refused clients (both on, as in production), budgets'
days and months. So a test crosses a minute's edge, a day's end and a month's end where it chooses, with no sleep
and no rerun.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from plans.models import CostBudget
from quotas.clock import SYSTEM_CLOCK, ManualClock
from quotas.engine import default_engine
from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
from quotas.store.decision import DecideCall
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

#: The engine's store: the memory store, or the session's redis-server.
STORES = [pytest.param("memory", id="memory"), pytest.param("redis", id="redis", marks=pytest.mark.redis)]


@pytest.fixture(params=STORES)
def allowances_on(request, set_quotas):
    """Allowances for a client sending 2 requests within 0.1 s, up to 10 requests (as tests/quotas/test_allowances)."""
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=15, HORIZON=1.0, SHARE=0.5, MAX_REQUESTS=10)
    return request.param


def ask(wins):
    """One request's decision as the service asks it, allowances allowed."""
    return default_engine.runtime().guard.decide_call(DecideCall("{c}", wins, allowance_ok=True))


def next_edge(seconds: int, at: float) -> float:
    """The first edge of ``seconds``-long windows (aligned to the epoch) after ``at``."""
    return (at // seconds + 1) * seconds


def test_a_minute_edge_with_allowances_and_the_refusal_memory(allowances_on, quota_clock):
    """Five seconds before a minute's edge a busy client gets its 30 a minute, part of them from allowances,
    then refusals, remembered here until the edge (no Redis call); at the edge the next 30 are admitted."""
    wins = LimitRule(id="m", name="m", rates=parse_rates("30/min"), algorithm="fixed_window").windows
    edge = next_edge(60, quota_clock.now() + 5)  # at least 5 s ahead: the clock only moves forward
    quota_clock.set(edge - 5)
    decisions = [ask(wins) for _ in range(40)]
    assert sum(d.allowed for d in decisions) == 30
    assert any(d.allowance for d in decisions)  # served from an allowance, under the injected clock
    refused = [d for d in decisions if not d.allowed]
    assert any(d.local for d in refused)  # answered from the memory of refused clients
    assert {d.retry_after for d in refused} == {5}  # until the edge, by the injected clock
    quota_clock.advance(4.9)
    assert not ask(wins).allowed
    quota_clock.advance(0.1)  # the edge
    after = [ask(wins) for _ in range(40)]
    assert sum(d.allowed for d in after) == 30
    assert after[0].allowed
    assert not after[0].local  # decided by the store, in the new window


def priced_plan(period: str) -> str:
    """A plan whose requests cost 0.01 each unless they say more (``?est=``), with a 1.00 budget a ``period``;
    returns an API key of it."""
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period=period, amount=Decimal("1.00"))
    return issue_key(plan=plan)


def spend(key: str, amount: str) -> int:
    return APIClient().get(f"/t/priced?est={amount}", HTTP_X_API_KEY=key).status_code


@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_a_daily_budget_resets_at_midnight(allowances_on, quota_clock):
    """0.60 of a 1.00 day spent ten seconds before midnight (UTC, the budget zone): another 0.60 is refused until
    midnight, then admitted."""
    key = priced_plan("day")
    quota_clock.set(next_edge(86_400, quota_clock.now() + 10) - 10)  # the clock only moves forward
    assert spend(key, "0.60") == 200
    assert spend(key, "0.60") == 429
    quota_clock.advance(9.9)
    assert spend(key, "0.60") == 429
    quota_clock.advance(0.1)  # midnight
    assert spend(key, "0.60") == 200
    assert spend(key, "0.60") == 429


@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_a_monthly_budget_resets_at_the_months_end(allowances_on, quota_clock):
    """The same across a month's end: refused until the first of the next month, not at a day's end."""
    key = priced_plan("month")
    now = datetime.fromtimestamp(quota_clock.now(), UTC)
    first = datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=UTC)
    if first.timestamp() - 86_400 - 10 <= quota_clock.now():  # on the month's last day: the next month's
        first = datetime(first.year + first.month // 12, first.month % 12 + 1, 1, tzinfo=UTC)
    quota_clock.set(first.timestamp() - 86_400 - 10)  # ten seconds before the month's last day
    assert spend(key, "0.60") == 200
    quota_clock.advance(10)  # a day's end within the month: the month's spend stands
    assert spend(key, "0.60") == 429
    quota_clock.advance(86_400 - 0.1)
    assert spend(key, "0.60") == 429
    quota_clock.advance(0.1)  # the first of the month
    assert spend(key, "0.60") == 200


def test_a_manual_clock_moves_forward_only_and_both_readings_together():
    clock = ManualClock(1_000.0)
    clock.advance(2.5)
    clock.set(1_010.0)
    assert (clock.now(), clock.monotonic()) == (1_010.0, 1_010.0)
    with pytest.raises(ValueError, match="forward"):
        clock.set(1_000.0)
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    clock.sleep(0.25)  # a shaped request's hold, on this clock: time moves, no thread waits
    assert (clock.now(), clock.monotonic()) == (1_010.25, 1_010.25)
    assert clock.injected
    assert not SYSTEM_CLOCK.injected


def test_production_reads_the_system_clocks_directly():
    """The system clock's readings are the time module's functions themselves: a part that binds ``clock.now``
    calls C, no frame of ours."""
    import time

    assert SYSTEM_CLOCK.now is time.time
    assert SYSTEM_CLOCK.monotonic is time.monotonic
    assert SYSTEM_CLOCK.sleep is time.sleep


def test_the_runtime_holds_the_clock_every_part_reads(quota_clock):
    runtime = default_engine.runtime()
    assert runtime.clock is quota_clock
    assert runtime.guard.clock is quota_clock
    assert runtime.store.clock is quota_clock
    assert runtime.rules.clock is quota_clock
