"""The control rule on load traces: explicit time, no I/O (adaptive/policy.py)."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest

from adaptive.policy import (
    CRITICAL,
    ELEVATED,
    HEALTHY,
    OVERLOADED,
    UNKNOWN,
    Fleet,
    PlanInfo,
    State,
    Thresholds,
    aggregate,
    ewma,
    plan_multipliers,
    step,
)

from .conftest import (
    DEFAULT_PARAMS,
    ENTERPRISE,
    FREE,
    PLANS,
    PRO,
    changes,
    cpu_trace,
    host,
    load_trace,
    replay,
    reversals,
)


def noisy(center: float, spread: float, n: int, seed: int) -> list[float]:
    """``n`` loads uniformly within ``center +- spread`` (seeded: the same trace on every run)."""
    rng = random.Random(seed)
    return [center + rng.uniform(-spread, spread) for _ in range(n)]


def seed_step_table(load: float) -> float:
    """The seeds' rule, for comparison: load over 60/80/90 % gives 0.8/0.5/0.3."""
    return 0.3 if load > 0.9 else 0.5 if load > 0.8 else 0.8 if load > 0.6 else 1.0


def overloaded_state() -> State:
    """The state after two minutes at 97 % CPU."""
    return replay(cpu_trace([0.3] * 4 + [0.97] * 24))[-1].outcome.state


# Overload


def test_overload_is_cut_within_one_run_lowest_priority_first() -> None:
    """A jump to 97 % CPU is cut at the first run that sees it, and only the free plan at first."""
    runs = replay(cpu_trace([0.3] * 4 + [0.97] * 24))
    onset = next(i for i, r in enumerate(runs) if r.t == 20.0)
    assert all(r.m == {FREE: 1.0, PRO: 1.0, ENTERPRISE: 1.0} for r in runs[:onset])
    first = runs[onset]
    assert first.outcome.action == "cut"
    assert first.m[FREE] < 1.0
    assert first.m[PRO] == first.m[ENTERPRISE] == 1.0
    assert first.outcome.reason.startswith("cut: cpu")


def test_overload_sheds_by_priority_and_respects_floors() -> None:
    """Under sustained overload free <= pro <= enterprise at every run; each ends at (near) its floor."""
    runs = replay(cpu_trace([0.3] * 4 + [0.97] * 24))
    for r in runs:
        assert r.m[FREE] <= r.m[PRO] <= r.m[ENTERPRISE]
        assert r.m[FREE] >= 0.1
        assert r.m[PRO] >= 0.3
        assert r.m[ENTERPRISE] >= 0.8
    first_cut = {p: next(r.t for r in runs if r.m[p] < 1.0) for p in (FREE, PRO, ENTERPRISE)}
    assert first_cut[FREE] < first_cut[PRO] < first_cut[ENTERPRISE]
    last = runs[-1]
    assert last.outcome.state.level == pytest.approx(DEFAULT_PARAMS.min_level)
    assert last.m[FREE] < 0.2
    assert last.m[PRO] < 0.4
    assert last.m[ENTERPRISE] < 0.85


def test_overload_cuts_wait_for_the_cooldown_unless_critical() -> None:
    """At 85 % (overloaded, not critical) cuts come at most once per cooldown; at 97 % on every run."""
    overloaded = replay(cpu_trace([0.85] * 12))
    cuts = [r.t for r in overloaded if r.outcome.action == "cut"]
    assert all(b - a >= DEFAULT_PARAMS.decrease_cooldown for a, b in itertools.pairwise(cuts))
    assert len(cuts) == 6  # t = 0, 10, 20, ... with 5 s runs
    critical = replay(cpu_trace([0.97] * 6))
    assert [r.outcome.action for r in critical] == ["cut"] * 6
    assert critical[-1].outcome.zone == CRITICAL


def test_a_cut_that_works_stops_further_cuts() -> None:
    """When the load falls below high after a cut, the fast signal follows and cutting stops."""
    runs = replay(cpu_trace([0.3] * 2 + [0.9] * 2 + [0.7] * 10))
    cuts = [r for r in runs if r.outcome.action == "cut"]
    assert len(cuts) == 1
    assert runs[-1].outcome.zone == ELEVATED
    assert changes(runs) == 1


# Recovery


def test_recovery_waits_then_climbs_gradually_highest_priority_first() -> None:
    """After the overload ends, limits hold for the recovery delay, then rise by at most rate x dt."""
    state = overloaded_state()
    start = state.at + 5
    runs = replay(cpu_trace([0.2] * 40, start=start), state=state)
    levels = [state.level] + [r.outcome.state.level for r in runs]
    assert all(b >= a for a, b in itertools.pairwise(levels))  # never down while recovering
    assert all(b - a <= DEFAULT_PARAMS.recovery_rate * 5 + 1e-9 for a, b in itertools.pairwise(levels))
    first_rise = next(r.t for r in runs if r.outcome.action == "recover")
    assert first_rise - start >= DEFAULT_PARAMS.recovery_delay
    assert runs[-1].m == {FREE: 1.0, PRO: 1.0, ENTERPRISE: 1.0}
    back = {p: next(r.t for r in runs if r.m[p] == 1.0) for p in (FREE, PRO, ENTERPRISE)}
    assert back[ENTERPRISE] < back[PRO] < back[FREE]


def test_a_brief_dip_does_not_count_as_recovery() -> None:
    """Two good runs inside an overload do not raise the limits: the slow signal still sits above low."""
    state = overloaded_state()
    runs = replay(cpu_trace([0.2, 0.2, 0.9, 0.9], start=state.at + 5), state=state)
    assert all(r.outcome.action != "recover" for r in runs)
    assert [r.outcome.zone for r in runs[:2]] == [ELEVATED, ELEVATED]


# Noise at a threshold: no flapping


def test_noisy_load_at_the_high_threshold_never_raises_limits() -> None:
    """CPU 80 % +- 6 % for 10 min: limits only ever go down (no reversal), in few steps.

    The seeds' step table flips between 0.8 and 0.5 on the same trace dozens of times.
    """
    loads = noisy(0.80, 0.06, 120, seed=1)
    runs = replay(cpu_trace(loads))
    assert reversals(runs) == 0
    assert changes(runs) <= 10
    table = [seed_step_table(v) for v in loads]
    table_changes = sum(1 for a, b in itertools.pairwise(table) if a != b)
    assert table_changes > 40


def test_noisy_load_at_the_low_threshold_never_cuts() -> None:
    """After an overload, CPU 60 % +- 6 %: limits only recover (slowly), never cut again."""
    state = overloaded_state()
    runs = replay(cpu_trace(noisy(0.60, 0.06, 120, seed=2), start=state.at + 5), state=state)
    assert all(r.outcome.action in ("hold", "recover") for r in runs)
    assert reversals(runs) == 0


def test_noisy_load_inside_the_band_changes_nothing() -> None:
    """After a cut, CPU 70 % +- 8 % (between low and high) holds the limits exactly where they are."""
    state = overloaded_state()
    runs = replay(cpu_trace(noisy(0.70, 0.08, 120, seed=3), start=state.at + 5), state=state)
    assert changes(runs) == 0
    assert {r.outcome.zone for r in runs} == {ELEVATED}


def test_recorded_cpu_burst() -> None:
    """A trace recorded on the 2-core development machine, one sample a second: 10 s idle, every core busy
    for 15 s, then idle but for other jobs' bursts (about 50 % for 7 s from 55 s, a spike to 93 % at 63 s).

    The burst is cut within 3 s, free first and deepest, enterprise last and never below 0.8; after it
    nothing is cut again (the later spike only pauses recovery) and limits climb back without a reversal.
    """
    trace = load_trace("cpu_burst_recorded")
    runs = replay(trace)
    burst_start = next(t for t, samples in trace if samples[0]["cpu"] > 0.9)
    burst_end = next(t for t, samples in trace if t > burst_start and samples[0]["cpu"] < 0.5)
    assert burst_end - burst_start == pytest.approx(15, abs=1)
    first_cut = {p: next(r.t for r in runs if r.m[p] < 1.0) for p in (FREE, PRO, ENTERPRISE)}
    assert first_cut[FREE] - burst_start <= 3.5
    assert first_cut[FREE] < first_cut[PRO] < first_cut[ENTERPRISE] < burst_end
    assert min(r.m[FREE] for r in runs) <= 0.2
    assert min(r.m[ENTERPRISE] for r in runs) >= 0.8
    after = [r for r in runs if r.t >= burst_end]
    assert all(r.outcome.action in ("hold", "recover") for r in after)
    assert any(r.outcome.zone == ELEVATED for r in after if r.t > 60)  # the spike paused recovery
    assert reversals(runs) == 1  # down during the burst, then only up
    assert runs[-1].m[ENTERPRISE] == runs[-1].m[PRO] == 1.0
    assert runs[-1].m[FREE] > 0.8


# Missing hosts and signals


def test_a_host_that_stops_reporting_drops_out() -> None:
    """Two hosts, one overloaded: the worst host decides; once it stops reporting, the other one does."""
    both = [(t, [host(cpu=0.97, name="a"), host(cpu=0.3, name="b")]) for t in range(0, 30, 5)]
    only_b = [(t, [host(cpu=0.3, name="b")]) for t in range(30, 120, 5)]
    runs = replay(both + only_b)
    assert runs[0].outcome.action == "cut"
    assert runs[0].outcome.signals["hosts"] == 2
    assert runs[-1].outcome.signals["hosts"] == 1
    assert any(r.outcome.action == "recover" for r in runs[6:])


def test_mean_aggregation_averages_hosts() -> None:
    """With AGGREGATE = "mean", one busy host among four does not cut."""
    params = replace(DEFAULT_PARAMS, aggregate="mean")
    samples = [host(cpu=0.97, name="a")] + [host(cpu=0.3, name=n) for n in "bcd"]
    runs = replay([(t, samples) for t in range(0, 30, 5)], params=params)
    assert all(r.outcome.action != "cut" for r in runs)
    assert runs[0].outcome.signals["observed"]["cpu"] == pytest.approx((0.97 + 0.9) / 4)


def test_processes_of_one_host_count_once() -> None:
    """Three processes of one host and one other host average as two hosts (each by its worst process)."""
    samples = [host(db=0.2, name="a"), host(db=0.9, name="a"), host(db=0.4, name="a"), host(db=0.1, name="b")]
    assert aggregate(samples, ["db"], "mean") == {"db": pytest.approx(0.5)}
    assert aggregate(samples, ["db"], "max") == {"db": 0.9}


def test_no_host_reporting_holds_then_recovers() -> None:
    """When every host falls silent, limits hold for NO_SIGNAL_HOLD, then recover; never cut."""
    state = overloaded_state()
    silent = [(state.at + 5 * i, []) for i in range(1, 40)]
    runs = replay(silent, state=state)
    assert {r.outcome.zone for r in runs} == {UNKNOWN}
    held = [r for r in runs if r.t - state.at < DEFAULT_PARAMS.no_signal_hold]
    assert all(r.outcome.action == "hold" for r in held)
    assert changes(held) == 0
    rising = [r for r in runs if r.outcome.action == "recover"]
    assert rising
    assert rising[0].t - state.at >= DEFAULT_PARAMS.no_signal_hold
    assert "no host has reported" in rising[0].outcome.reason
    assert runs[-1].m == {FREE: 1.0, PRO: 1.0, ENTERPRISE: 1.0}


def test_nothing_reported_yet_stays_at_full_capacity() -> None:
    """A fresh controller with no samples publishes 1.0 for every plan."""
    runs = replay([(0.0, []), (5.0, [])])
    assert runs[-1].m == {FREE: 1.0, PRO: 1.0, ENTERPRISE: 1.0}
    assert runs[-1].outcome.reason == "no host reports load yet"


def test_missing_db_signal_is_unavailable_not_zero() -> None:
    """SQLite hosts report db None: it is listed as unavailable and takes no part in the decision."""
    runs = replay([(t, [host(cpu=0.7, db=None)]) for t in range(0, 60, 5)])
    signals = runs[-1].outcome.signals
    assert signals["observed"]["db"] is None
    assert "db" not in signals["fast"]
    assert runs[-1].outcome.zone == ELEVATED  # decided by CPU alone
    assert changes(runs) == 0


def test_saturated_db_pool_cuts_even_with_idle_cpu() -> None:
    """A connection pool at 95 % is overload whatever the CPU says."""
    runs = replay([(t, [host(cpu=0.1, db=0.95)]) for t in range(0, 20, 5)])
    assert runs[0].outcome.zone == OVERLOADED
    assert runs[0].outcome.reason.startswith("cut: db 0.95 >= high 0.85")


def test_server_db_saturation_merges_with_pools() -> None:
    """The server's connections in use count as a db signal, also for hosts without a pool."""
    runs = replay([(0.0, [host(cpu=0.1, db=None)])], fleet=Fleet(server_db=0.9))
    assert runs[0].outcome.signals["observed"]["db"] == 0.9
    assert runs[0].outcome.action == "cut"
    runs = replay([(0.0, [host(cpu=0.1, db=0.3)])], fleet=Fleet(server_db=0.1))
    assert runs[0].outcome.signals["observed"]["db"] == 0.3


def test_garbage_in_samples_is_ignored() -> None:
    """Strings, booleans, NaN, infinities and negative values are no measurements."""
    samples = [{"host": "a", "cpu": "high"}, {"host": "b", "cpu": True}, {"host": "c", "cpu": math.nan}]
    samples += [{"host": "d", "cpu": -1}, {"host": "e", "cpu": math.inf}, {"host": "f"}]
    assert aggregate(samples, ["cpu"]) == {"cpu": None}


# Time, interval independence


def test_the_rule_does_not_depend_on_the_controller_interval() -> None:
    """The same load story run every 1 s and every 5 s: first cut and full recovery within one run of each other."""

    def story(every: float) -> list:
        n = int(300 / every)
        return cpu_trace([0.3 if t < 30 else 0.97 if t < 90 else 0.2 for t in (i * every for i in range(n))], every)

    def timeline(every: float) -> tuple[float, float]:
        runs = replay(story(every))
        cut = next(r.t for r in runs if r.outcome.action == "cut")
        back = next(r.t for r in runs if r.t > 90 and r.m[FREE] == 1.0)
        return cut, back

    fine, coarse = timeline(1.0), timeline(5.0)
    assert abs(fine[0] - coarse[0]) <= 5
    assert abs(fine[1] - coarse[1]) <= 10


def test_ewma_weight_follows_elapsed_time() -> None:
    """One step of dt equals the composition of smaller steps covering dt."""
    once = ewma(0.0, 1.0, 4.0, 2.0)
    twice = ewma(ewma(0.0, 1.0, 2.0, 2.0), 1.0, 2.0, 2.0)
    assert once == pytest.approx(twice)
    assert once == pytest.approx(1 - math.exp(-2))
    assert ewma(None, 0.7, 5.0, 2.0) == 0.7


# Plans, pins, switch


def test_plan_multipliers_cascade() -> None:
    """Full capacity is 1.0 for all, zero is every floor, lower tiers never above higher ones."""
    assert plan_multipliers(1.0, PLANS) == {FREE: 1.0, PRO: 1.0, ENTERPRISE: 1.0}
    assert plan_multipliers(0.0, PLANS) == {FREE: 0.1, PRO: 0.3, ENTERPRISE: 0.8}
    previous = None
    for i in range(101):
        m = plan_multipliers(1 - i / 100, PLANS)
        assert m[FREE] <= m[PRO] <= m[ENTERPRISE] or m[PRO] == 0.3  # pro's floor is 0.3, free's 0.1
        if previous:
            assert all(m[p] <= previous[p] for p in m)
        previous = m


def test_equal_priorities_share_a_multiplier_and_one_tier_is_linear() -> None:
    """Plans of equal priority are one tier; with one tier the multiplier is linear in the level."""
    plans = (PlanInfo(1, "a", 3, 0.1), PlanInfo(2, "b", 3, 0.1))
    assert plan_multipliers(0.5, plans) == {1: 0.55, 2: 0.55}


def test_pins_replace_computed_values() -> None:
    """A pinned plan gets its pin whatever the load; the reason names it."""
    runs = replay(cpu_trace([0.97] * 3), pins={ENTERPRISE: 0.5})
    assert all(r.m[ENTERPRISE] == 0.5 for r in runs)
    assert runs[-1].m[FREE] < 1.0
    assert "pinned: enterprise=0.50" in runs[-1].outcome.reason


def test_switched_off_publishes_pins_else_full_capacity() -> None:
    """Adaptation off: 1.0 for every plan but pinned ones, the level resets, the signals are still read."""
    state = overloaded_state()
    runs = replay(cpu_trace([0.97] * 3, start=state.at + 5), state=state, enabled=False, pins={PRO: 0.4})
    assert runs[-1].m == {FREE: 1.0, PRO: 0.4, ENTERPRISE: 1.0}
    assert runs[-1].outcome.action == "off"
    assert runs[-1].outcome.state.level == 1.0
    assert runs[-1].outcome.signals["fast"]["cpu"] > 0.9


def test_a_new_plan_appears_in_the_output() -> None:
    """The multipliers always list exactly the current plans."""
    runs = replay(cpu_trace([0.3]), plans=PLANS[:2])
    runs += replay(cpu_trace([0.3], start=5.0), plans=PLANS, state=runs[-1].outcome.state)
    assert set(runs[-1].m) == {FREE, PRO, ENTERPRISE}
    assert runs[-1].outcome.changed


def test_state_survives_json_and_garbage_starts_afresh() -> None:
    """The state round-trips through JSON; unreadable state is a fresh one."""
    state = overloaded_state()
    assert State.from_json(state.to_json()) == state
    assert State.from_json({"level": "x"}) == State()
    assert State.from_json(None) == State()
    assert State.from_json(["nope"]) == State()


def test_healthy_zone_when_every_signal_is_low() -> None:
    """Healthy needs every available signal below its low mark."""
    runs = replay([(0.0, [host(cpu=0.1, memory=0.1, db=0.1)])])
    assert runs[0].outcome.zone == HEALTHY
    runs = replay([(0.0, [host(cpu=0.1, memory=0.85, db=0.1)])])
    assert runs[0].outcome.zone == ELEVATED


def test_step_is_pure() -> None:
    """The input state is not modified."""
    state = overloaded_state()
    before = state.to_json()
    step(state, [host(cpu=0.2)], PLANS, state.at + 5, DEFAULT_PARAMS)
    assert state.to_json() == before


def test_redis_latency_is_an_optional_signal() -> None:
    """With "redis_ms" among the signals, slow Redis round trips (milliseconds) cut like any other signal."""
    params = replace(DEFAULT_PARAMS, thresholds={**DEFAULT_PARAMS.thresholds, "redis_ms": Thresholds(5, 20, 100)})
    sample = {**host(cpu=0.2), "redis_ms": 35.0}
    runs = replay([(0.0, [sample])], params=params)
    assert runs[0].outcome.reason.startswith("cut: redis_ms 35.00 >= high 20.00")
    runs = replay([(0.0, [sample])])  # not configured: ignored
    assert runs[0].outcome.action == "hold"
