"""The added signals through the control rule, as pure functions with explicit time: request latency and the 5xx
share (load figures against their targets, adaptive/responses.py), the project's hook and the planned capacity
of a schedule (adaptive/policy.py's Fleet, adaptive/schedule.py)."""

from __future__ import annotations

from collections import deque
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from adaptive.policy import Fleet, Params, State, Thresholds, step
from adaptive.responses import drain, percentile, response_signals
from adaptive.schedule import capacity_at, parse_schedule, planned_capacity

from .conftest import DEFAULT_PARAMS, ENTERPRISE, FREE, PLANS, PRO, Run, replay

#: The defaults plus the added signals at the thresholds docs/concepts.md suggests.
PARAMS = Params(
    thresholds={
        **DEFAULT_PARAMS.thresholds,
        "latency": Thresholds(0.8, 1.0, 2.0),
        "errors": Thresholds(0.5, 1.0, 5.0),
        "hook": Thresholds(0.8, 1.0, 1.5),
    }
)
#: A host whose CPU and memory are healthy: only the signal under test can move the level.
CALM = {"host": "web1", "cpu": 0.2, "memory": 0.4}


def check_cuts_cheap_plans_first_then_recovers(runs: list[Run], calm_from: int) -> None:
    """Runs before ``calm_from`` are under load, the rest calm: the first run cuts the free plan and not
    enterprise; under load free is never above pro, pro never above enterprise; the last run is back at 1.0."""
    first = runs[0]
    assert first.outcome.action == "cut"
    assert first.m[FREE] < 1.0
    assert first.m[ENTERPRISE] == 1.0
    for run in runs[:calm_from]:
        assert run.m[FREE] <= run.m[PRO] <= run.m[ENTERPRISE]
    assert min(run.m[FREE] for run in runs[:calm_from]) < min(run.m[PRO] for run in runs[:calm_from])
    recovering = [run.m[FREE] for run in runs[calm_from:]]
    assert recovering == sorted(recovering)  # gradually, never down again
    assert runs[-1].m == {FREE: 1.0, PRO: 1.0, ENTERPRISE: 1.0}
    assert any(run.outcome.action == "recover" for run in runs[calm_from:])


@pytest.mark.parametrize(
    ("signal", "loaded", "calm"),
    [
        ("latency", 1.6, 0.3),  # p90 400 ms against 250 ms, then 75 ms
        ("errors", 3.0, 0.0),  # 3 % of responses 5xx against 1 %, then none
    ],
)
def test_a_response_signal_over_its_target_cuts_then_recovers(signal: str, loaded: float, calm: float) -> None:
    """A host's latency or 5xx load figure over high cuts the cheapest plan first; back under low, the level
    recovers at RECOVERY_RATE until every plan is at 1.0."""
    trace = [(t * 5.0, [{**CALM, signal: loaded}]) for t in range(8)]
    trace += [(40.0 + t * 5.0, [{**CALM, signal: calm}]) for t in range(40)]
    runs = replay(trace, PARAMS)
    check_cuts_cheap_plans_first_then_recovers(runs, calm_from=8)
    assert runs[0].outcome.reason.startswith(f"cut: {signal} ")


def test_response_signals_are_load_figures_against_their_targets() -> None:
    """The p90 (nearest rank) over LATENCY_TARGET_MS and the 5xx share over ERROR_RATE_TARGET; a 4xx is not
    an error; fewer than MIN_RESPONSES responses report nothing (unavailable, not zero)."""
    responses = [(ms / 1000, 200) for ms in range(1, 98)] + [(0.098, 500), (0.099, 503), (0.1, 429)]
    fields = response_signals(responses, latency_target_ms=250.0, error_rate_target=0.01, min_responses=20)
    assert fields == {"latency_ms": 90.0, "latency": 0.36, "error_rate": 0.02, "errors": 2.0}
    quiet = response_signals(responses[:19], 250.0, 0.01, min_responses=20)
    assert quiet == {"latency_ms": None, "latency": None, "error_rate": None, "errors": None}
    assert percentile([5.0]) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]) == 10.0


def test_a_quiet_host_takes_no_part_in_latency() -> None:
    """Without a latency figure (too few responses) the signal is unavailable, not zero: it neither cuts nor
    counts as calm, and the history of an earlier high figure is dropped."""
    runs = replay([(0.0, [{**CALM, "latency": 1.6}]), (5.0, [{**CALM, "latency": None}]), (10.0, [CALM])], PARAMS)
    assert runs[0].outcome.state.fast["latency"] == 1.6
    assert [run.outcome.signals["observed"]["latency"] for run in runs[1:]] == [None, None]
    assert "latency" not in runs[1].outcome.state.fast
    assert "latency" not in runs[1].outcome.signals["fast"]


def test_drain_takes_what_was_recorded_once() -> None:
    """What drain returns is gone from the deque; the next interval starts empty."""
    recorded: deque[tuple[float, int]] = deque(maxlen=3)
    for n in range(5):
        recorded.append((n / 1000, 200))
    assert drain(recorded) == [(0.002, 200), (0.003, 200), (0.004, 200)]  # bounded: the oldest fell out
    assert drain(recorded) == []


def replay_fleet(fleets: list[Fleet], every: float = 5.0) -> list[Run]:
    """One run every ``every`` seconds on a calm host, with the fleet's readings of each run."""
    state, runs = State(), []
    for n, fleet in enumerate(fleets):
        outcome = step(state, [CALM], PLANS, n * every, PARAMS, fleet=fleet)
        state = outcome.state
        runs.append(Run(n * every, outcome))
    return runs


def test_the_hook_over_its_target_cuts_then_recovers() -> None:
    """The hook's figure, read once per run for the whole fleet, goes through the same rule as the hosts'."""
    runs = replay_fleet([Fleet(signals={"hook": 1.7 if n < 8 else 0.2}) for n in range(48)])
    check_cuts_cheap_plans_first_then_recovers(runs, calm_from=8)
    assert runs[0].outcome.reason.startswith("cut: hook 1.70 >= critical 1.50")


def test_an_unavailable_hook_is_no_load() -> None:
    """A hook that failed (None) takes no part; a hook not among the thresholds is ignored."""
    runs = replay([(0.0, [CALM])], PARAMS, fleet=Fleet(signals={"hook": None}))
    assert runs[0].outcome.signals["observed"]["hook"] is None
    assert runs[0].outcome.action == "hold"
    runs = replay([(0.0, [CALM])], DEFAULT_PARAMS, fleet=Fleet(signals={"hook": 9.0}))
    assert "hook" not in runs[0].outcome.signals["observed"]
    assert runs[0].m[FREE] == 1.0


def test_planned_capacity_cuts_at_once_holds_then_recovers() -> None:
    """Entering a window of capacity 0.5 cuts the level to 0.5 (cheap plans first, enterprise untouched);
    healthy load does not lift it above 0.5 inside the window; after it, the level recovers gradually."""
    window = Fleet(capacity=0.5, planned_by="schedule 01:00-04:00 UTC")
    runs = replay_fleet([window] * 10 + [Fleet(capacity=1.0, planned_by="no window of the schedule")] * 50)
    check_cuts_cheap_plans_first_then_recovers(runs, calm_from=10)
    assert runs[0].outcome.state.level == 0.5
    assert runs[0].outcome.reason == "cut: planned capacity 0.50 (schedule 01:00-04:00 UTC); level 1.00 -> 0.50"
    assert {run.outcome.state.level for run in runs[:10]} == {0.5}
    assert runs[5].outcome.reason.startswith("hold at planned capacity 0.50")
    assert runs[0].outcome.signals["planned"] == {"capacity": 0.5, "by": "schedule 01:00-04:00 UTC"}


def test_load_cuts_below_the_planned_capacity() -> None:
    """The schedule is a ceiling: overload inside a window still cuts, from the planned level down."""
    fleet = Fleet(capacity=0.5)
    trace = [(0.0, [CALM]), (15.0, [{**CALM, "cpu": 0.99}])]
    runs = replay(trace, PARAMS, fleet=fleet)
    assert runs[0].outcome.state.level == 0.5
    assert runs[1].outcome.state.level == pytest.approx(0.35)
    assert runs[1].outcome.reason.startswith("cut: cpu")


def test_the_schedule_is_off_with_adaptation() -> None:
    """Adaptation off publishes 1.0 whatever the schedule plans."""
    runs = replay([(0.0, [CALM])], PARAMS, fleet=Fleet(capacity=0.5), enabled=False)
    assert runs[0].m == {FREE: 1.0, PRO: 1.0, ENTERPRISE: 1.0}


def test_windows_cover_their_start_not_their_end_and_may_run_past_midnight() -> None:
    """01:00-04:00 covers 01:00 to 03:59:59; 22:00-02:00 covers both sides of midnight; 00:00 or 24:00 as an
    end is midnight."""
    windows = parse_schedule(
        [{"start": "01:00", "end": "04:00", "capacity": 0.5}, {"start": "22:00", "end": "00:30", "capacity": 0.8}]
    )
    assert capacity_at(windows, 59.99)[0] == 1.0
    assert capacity_at(windows, 60)[0] == 0.5
    assert capacity_at(windows, 239.99)[0] == 0.5
    assert capacity_at(windows, 240)[0] == 1.0
    assert capacity_at(windows, 23 * 60 + 59)[0] == 0.8
    assert capacity_at(windows, 10)[0] == 0.8
    assert capacity_at(windows, 30)[0] == 1.0
    (late,) = parse_schedule([{"start": "23:00", "end": "24:00", "capacity": 0.9}])
    assert str(late) == "23:00-24:00"
    assert capacity_at([late], 23 * 60 + 30)[0] == 0.9


def test_windows_are_wall_clock_time_in_their_zone_across_dst() -> None:
    """01:00 in Paris is 00:00 UTC in winter and 23:00 UTC the day before in summer: both are in the window."""
    schedule = [{"start": "01:00", "end": "04:00", "capacity": 0.5}]
    paris = ZoneInfo("Europe/Paris")
    winter = datetime(2026, 1, 15, 1, 30, tzinfo=paris).timestamp()
    summer = datetime(2026, 7, 15, 1, 30, tzinfo=paris).timestamp()
    assert planned_capacity(schedule, "Europe/Paris", winter)[0] == 0.5
    assert planned_capacity(schedule, "Europe/Paris", summer)[0] == 0.5
    assert planned_capacity(schedule, "UTC", summer)[0] == 1.0  # 23:30 UTC
    _, window = planned_capacity(schedule, "Europe/Paris", winter)
    assert str(window) == "01:00-04:00"
