"""Budgets under random traffic: prices, estimates, actual costs, processes and allowances (Hypothesis).

Each example runs against the real redis-server: a few "processes" (each its own engine runtime, with its own
allowances, as gunicorn workers have) send one client's requests to one daily budget, each request estimated,
admitted or refused, then reconciled to its actual cost after its "view", in a random interleaving that keeps
several requests in flight. Whatever the draw:

- the budget is overspent by at most the documented bound: the largest sum, over the requests in flight at one
  moment, of (actual - estimate);
- the usage counted equals the sum of the admitted requests' actual costs;
- each threshold (80 %, 100 %) is reported at most once, and once if the spend reached it: an admitted request's
  when it is settled, a refusal's when it is decided.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quotas.formats.rates import Rate
from quotas.rules.limits import LimitRule
from quotas.runtime import build_runtime
from quotas.store.decision import DecideCall
from tests.usage_counters import usage_totals

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

TAG = "{s.1}"
USAGE = "1|-"


def budget_windows(amount: int):
    return LimitRule("b", "day-budget", (Rate(amount, 86_400),), algorithm="budget", period="day").windows


requests = st.lists(
    st.tuples(
        st.integers(0, 2),  # the process that serves it
        st.integers(0, 50_000),  # estimate (micro-units)
        st.integers(0, 80_000),  # actual cost
        st.integers(0, 3),  # how many later requests start before this one's view ends
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    amount=st.integers(0, 500_000),
    traffic=requests,
    allowances=st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {"SHARE": st.sampled_from([0.1, 0.5, 1.0]), "MAX_REQUESTS": st.integers(2, 30), "HORIZON": st.just(5.0)}
        ),
    ),
)
# The review's case: requests one at a time, priced far below what they cost, with allowances taken.
@example(
    amount=1_000_000,
    traffic=[(0, 10_000, 300_000, 0)] * 12,
    allowances={"SHARE": 0.1, "MAX_REQUESTS": 10, "HORIZON": 5.0},
)
@example(
    amount=1_000_000,
    traffic=[(0, 10_000, 300_000, 0)] * 12,
    allowances={"SHARE": 1.0, "MAX_REQUESTS": 30, "HORIZON": 5.0},
)
def test_budgets_hold_their_bound_count_actual_costs_and_alert_once(
    redis_client, set_quotas, amount, traffic, allowances
):
    redis_client.flushall()
    if allowances is None:
        set_quotas("ALLOWANCES", ENABLED=False)
    else:
        set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=0.001, **allowances)
    windows = budget_windows(amount)
    processes = [build_runtime() for _ in range(3)]
    try:
        admitted_actual, bound, alerts = run(processes, windows, traffic, allowances is not None)
        spent = processes[0].guard.peek(TAG, windows).states[0].used
    finally:
        for runtime in processes:
            runtime.close()

    assert spent == admitted_actual  # every admitted request charged its actual cost, once
    assert spent <= amount + bound
    assert usage_totals(redis_client).get("c", 0) == admitted_actual
    assert_one_alert_per_threshold(alerts, amount, spent)


def run(processes, windows, traffic, allowances: bool) -> tuple[int, int, list[int]]:
    """Send ``traffic``; returns the admitted requests' actual costs, the overspend bound, and the alerts."""
    alerts: list[int] = []
    in_flight: list[tuple[object, object, int, int]] = []  # (runtime, decision, estimate, actual)
    bound, admitted_actual = 0, 0

    def finish(entry) -> None:
        # As quotas.service.settle: the thresholds an admitted request reports are those its settled cost reaches.
        runtime, decision, _, actual = entry
        runtime.guard.reconcile(decision, actual)
        alerts.extend(s.alert for s in decision.states if s.alert)

    for process, estimate, actual, overlap in traffic:
        runtime = processes[process]
        call = DecideCall(TAG, windows, cost_micros=estimate, usage=USAGE, allowance_ok=allowances)
        decision = runtime.guard.decide_call(call)
        if not decision.allowed:  # a refusal reports at once (it was charged nothing)
            alerts.extend(s.alert for s in decision.states if s.alert)
        if decision.allowed:
            in_flight.append((runtime, decision, estimate, actual))
            admitted_actual += actual
            bound = max(bound, sum(max(0, a - e) for _, _, e, a in in_flight))
        while len(in_flight) > overlap:  # the oldest views end, keeping `overlap` requests in flight
            finish(in_flight.pop(0))
    while in_flight:
        finish(in_flight.pop(0))
    for runtime in processes:
        runtime.guard.settle_allowances(everything=True)
        assert runtime.guard.flush_usage()
    return admitted_actual, bound, alerts


def assert_one_alert_per_threshold(alerts: list[int], amount: int, spent: int) -> None:
    """Each threshold reported at most once, and once if the spend reached it."""
    reached_80 = sum(1 for a in alerts if a & 1)
    reached_100 = sum(1 for a in alerts if a & 2)
    assert reached_80 <= 1
    assert reached_100 <= 1
    if amount and spent * 5 >= amount * 4:
        assert reached_80 == 1
    if amount and spent >= amount:
        assert reached_100 == 1
