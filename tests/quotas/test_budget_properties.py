"""Budgets under random traffic of a busy client, as production serves it (Hypothesis; issue 44).

Each example sends one client's requests through the quota service (``check``, then ``settle`` after the
"view") in several threads of three processes: the test's own and two workers started with ``spawn``, each with
its own runtime and so its own allowances, all against the test's redis-server and database. The client's plan
prices its paths (three prices, reused by every request: what an allowance is keyed by) and has allowances on,
so most of a busy client's requests are admitted from an allowance. Requests come in bursts on one process;
each burst's requests are checked a few at a time, concurrently, and settled some steps later, so several are
in flight at once. Their actual costs are equal to, below or above their price, or the view fails (5xx, its
estimate released); the poller's visit is a draw too. Whatever the draw:

- the budget is overspent by at most what the decision script and the allowances guarantee
  (``Traffic.redis_bound``), and by the documented bound (docs/concepts.md, *Overspend window*: the largest sum,
  over the requests in flight at one moment, of (actual - estimate)) where one process admitted every request;
  across processes, the documented per-process bound (``Traffic.redis_bound``), since the one-moment bound does
  not hold there (``DOCUMENTED_BOUND_ACROSS_PROCESSES``);
- the budget's spend and the usage counted both equal the sum of the admitted requests' actual costs;
- each threshold (80 %, 100 %) is signalled at most once, recorded (an Event row, a BudgetAlert row) as often as
  signalled, and so once if the final spend reached it.

The run reports the share of admitted requests served from allowances, and fails if an allowance served less
than 45 % of those of its busy examples. PostgreSQL only: the workers share the test database, which SQLite keeps in the
test process's memory.

Profiles: `make test` runs :data:`EXAMPLES` examples; ``QUOTAS_BUDGET_PROPERTIES=nightly`` runs 500, for the nightly
job (as ``QUOTAS_MONEY_MACHINE=nightly`` does for tests/quotas/test_money_machine.py).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import RequestFactory
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from notifications.events import BUDGET_THRESHOLD
from notifications.models import Event
from plans.models import CostBudget
from quotas.contract.keys import rules_version_key
from quotas.engine import default_engine
from quotas.formats.money import from_micros
from quotas.identity.clients import identify
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, issue_key
from tests.quotas.budget_workers import LANES, ONE_OPERATION, Op, Server, Workers, refusing_commands
from tests.usage_counters import usage_totals
from usage.models import BudgetAlert

# A failure's shrinking may take minutes more than the run, and should end with its example rather than the
# session's 120 s timeout.
pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(600)]

#: The plan's prices (micro-units), one per path prefix (/p0/, /p1/, /p2/): every request's estimate is one.
PRICES = (2_000, 5_000, 12_000)
#: The daily budgets of the subscriptions an example draws from: soon spent, crossed, rarely crossed, never.
AMOUNTS = (40_000, 150_000, 400_000, 5_000_000)
NIGHTLY = os.environ.get("QUOTAS_BUDGET_PROPERTIES") == "nightly"
#: Examples drawn (besides the explicit ones). Measured on two shared cores, 2026-11-29: 500 took 53 s of the test's
#: call (about 0.1 s an example, three processes busy); 150 keep the share check meaningful (BUSY_ADMITTED: 500
#: examples gave 4,115 admitted requests in busy examples, so 150 give about 1,200) in a third of the time.
EXAMPLES = 500 if NIGHTLY else 150
#: The fewest admitted requests of busy examples a run must have for its allowance share to mean something.
BUSY_ADMITTED = 500
WORKERS = 2  # processes besides the test's own
PROCESSES = WORKERS + 1
#: How often each kind of request comes in the draw: what its view costs and how it ends (budget_workers.KINDS).
DRAWS = {
    "equal": 3,  # reports no cost: its price stands
    "equal_reported": 1,
    "below": 3,
    "above": 1,  # each ends the client's allowances in its process: rarer, as estimates are meant to be generous
    "error": 1,  # 5xx: the estimate is released
    "settle_error": 1,
    "rollback": 1,
    "stream": 1,
    "stream_priced": 1,  # a streaming view that reports no cost: its price stands
}
#: Issue 44, found by this test: the overspend bound of the requests in flight at one moment holds in one process
#: only; across processes an allowance another process took keeps serving after upward reconciliations elsewhere
#: (the second explicit example: 0.048004 over a one-moment bound of 0.036001). docs/concepts.md (*Overspend
#: window*) now states the per-process bound, Traffic.redis_bound; True asserts the one-moment bound everywhere
#: (and fails on that example).
DOCUMENTED_BOUND_ACROSS_PROCESSES = False
#: Most requests in flight after a step, and most checked in one step; budget_workers.LANES covers both.
MOST_OVERLAP, MOST_TOGETHER = 3, 3
#: The least share of a run's busy examples' admitted requests an allowance must serve. Runs measured 56 % to
#: 65 % (2026-11-27, after a grant asked for before an upward reconciliation is given back unused): each example
#: starts without allowances (each of 3 processes x 3 prices takes its own), every upward reconciliation ends its
#: process's, and a nearly spent budget grants small ones (SHARE). 45 % leaves room for the spread of draws, and
#: still fails when allowances stop serving (the old test's draws: 0-5 of 40).
LEAST_SHARE = 0.45
BUSY = 20  # admitted requests that make an example's client busy


def actual_cost(kind: str, estimate: int, fraction: int) -> int:
    """What a request of ``kind`` estimated at ``estimate`` costs in the end, ``fraction`` (0-100) drawn."""
    if kind in ("equal", "equal_reported", "stream_priced"):
        return estimate
    if kind == "below":
        return estimate * fraction // 101
    if kind == "above":
        return estimate + 1 + estimate * 3 * fraction // 100
    if kind in ("error", "rollback"):
        return 0  # a failed view's estimate is released
    return estimate * 2 * fraction // 100  # settle_error, stream: any of equal, below and above


#: A burst of requests that mostly cost more than their price (longer answers than the estimate assumed): what
#: broke the bound while an upward reconciliation left the client's allowances serving.
UNDERESTIMATED = {"above": 3, "equal": 1, "below": 1}


def requests(weights: dict[str, int]) -> st.SearchStrategy:
    """One request: its kind (drawn by ``weights``, pending kinds left out), the fraction that makes its actual
    cost, how many stay in flight after its step, and whether it is checked with the one before."""
    kinds = [kind for kind, weight in weights.items() for _ in range(weight)]
    return st.tuples(
        st.sampled_from(kinds),
        st.integers(0, 100),
        st.integers(0, MOST_OVERLAP),
        st.booleans(),  # up to MOST_TOGETHER in one step
    )


bursts = st.tuples(
    st.integers(0, PROCESSES - 1),  # the process (a keep-alive connection's worker)
    st.integers(0, len(PRICES) - 1),  # the path, so the price
    # One burst in four mostly underestimated: enough to find a broken bound, few enough that most requests of
    # a run are served from allowances (each upward reconciliation ends the client's allowances in its process).
    st.sampled_from([DRAWS, DRAWS, DRAWS, UNDERESTIMATED]).flatmap(
        lambda weights: st.lists(requests(weights), min_size=1, max_size=12)
    ),
    st.booleans(),  # the poller visits that process after the burst
)


@dataclass
class Request:
    rid: int
    process: int
    price: int
    kind: str
    overlap: int
    together: bool
    actual: int
    lane: int = -1
    admitted: bool = False
    tick_after: bool = False  # the poller visits this request's process in the next step
    from_allowance: bool = False
    checked_step: int = -1  # the step whose operations checked it
    settled_step: int = -1  # the step whose operations settled it
    charged_step: int = -1  # a settlement that met a Redis error: the step whose poller visit charged it

    @property
    def reached_redis_step(self) -> int:
        """The step in which Redis learnt its actual cost: its settlement's, or its charge's after an error."""
        return self.charged_step if self.kind == "settle_error" else self.settled_step

    @property
    def excess(self) -> int:
        """What it cost beyond its estimate (its price), if anything."""
        return max(0, self.actual - PRICES[self.price])


@dataclass
class Outcome:
    """What the traffic did, as the test counts it."""

    admitted: int = 0
    from_allowances: int = 0
    actual: int = 0  # the admitted requests' actual costs
    bound: int = 0  # the documented overspend bound of this interleaving
    redis_bound: int = 0  # what the decision script guarantees (see Traffic.redis_bound)
    requests: list[Request] = field(default_factory=list)  # the admitted requests, in the order checked


class Cluster:
    """The test's own server and the workers: one step at a time, each process's operations at once."""

    def __init__(self, own: Server, workers: Workers) -> None:
        self.own = own
        self.workers = workers

    def run(self, ops: dict[int, list[tuple[int, Op]]]) -> dict[int, list[Any]]:
        """Run each process's ``(lane, op)`` pairs, all processes at once; their results by process."""
        for process, pairs in ops.items():
            if process and pairs:
                self.workers.send(process - 1, pairs)
        results = {0: self.own.run(ops.get(0, []))}
        for process, pairs in ops.items():
            if process and pairs:
                results[process] = self.workers.receive(process - 1)
        return results

    def everywhere(self, op: Op) -> list[Any]:
        """Run ``op`` in every process (lane 0); its results in process order."""
        results = self.run({p: [(0, op)] for p in range(PROCESSES)})
        return [results[p][0] for p in range(PROCESSES)]


class Traffic:
    """Sends one example's requests in steps, keeping track of what is in flight and of the overspend bound."""

    def __init__(self, cluster: Cluster, key: str, redis_client: Any) -> None:
        self.cluster = cluster
        self.key = key
        self.redis = redis_client
        self.in_flight: list[Request] = []  # admitted, not settled, oldest first
        self.settling: list[Request] = []  # of those, the ones the next step settles
        self.owing: list[Request] = []  # settled with a Redis error, their difference not charged yet
        self.ticks: set[int] = set()  # processes the poller visits in the next step
        self.outcome = Outcome()
        self.steps = 0  # steps run so far
        self.last_redis_step = -1  # the last step in which Redis admitted a request (took an allowance or not)

    def send(self, requests: list[Request]) -> Outcome:
        """Send ``requests`` (each checked in its turn, settled when more than its ``overlap`` are in flight)."""
        pending = list(requests)
        while pending or self.in_flight:
            group = [pending.pop(0)] if pending else []
            while pending and pending[0].together and len(group) < MOST_TOGETHER:
                group.append(pending.pop(0))
            self.step(group)
            self.ticks |= {r.process for r in group if r.tick_after}
            unmarked = [r for r in self.in_flight if r not in self.settling]
            keep = group[-1].overlap if pending and group else 0
            self.settling += unmarked[: max(0, len(unmarked) - keep)]
        for request in self.owing:  # charged by the poller's visit at the example's end
            request.charged_step = self.steps
        self.outcome.redis_bound = self.redis_bound()
        return self.outcome

    def redis_bound(self) -> int:
        """The overspend bound the decision script and the allowances guarantee, whatever the processes.

        Redis admitted the last request it decided (in step ``t0``) only with the budget's spend, the estimates
        in flight and the allowances held all within the amount. The spend moved past it after that only by
        requests settled since, by their (actual - estimate): those in flight at ``t0``, and those served from
        allowances after it. An upward reconciliation ends the client's allowances in its process, so after
        ``t0`` a process serves from them only the requests checked until its first such settlement. A
        settlement that met a Redis error reaches Redis only with its process's next poller visit (the ledger of
        quotas.store.money.owed): until then it is in flight as far as Redis knows.
        """
        t0 = self.last_redis_step
        ended: dict[int, int] = {}  # process -> the step of its first upward reconciliation after t0
        for request in self.outcome.requests:
            # A settlement that met a Redis error did not reconcile, so it ended nothing.
            if request.excess and request.settled_step > t0 and request.kind != "settle_error":
                ended[request.process] = min(ended.get(request.process, request.settled_step), request.settled_step)
        return sum(
            r.excess
            for r in self.outcome.requests
            if r.reached_redis_step >= t0
            and (r.checked_step <= t0 or r.checked_step <= ended.get(r.process, r.checked_step))
        )

    def step(self, checks: list[Request]) -> None:
        """Settle what is due and check ``checks``, all at once; a settlement that meets a Redis error has a
        step of its own (Redis refuses every command meanwhile)."""
        for request in [r for r in self.settling if r.kind == "settle_error"]:
            with refusing_commands(self.redis):
                self.cluster.run({request.process: [(request.lane, self.settle_op(request))]})
            self.done(request)
            self.owing.append(request)
            self.steps += 1
        visited = set(self.ticks)
        ops = self.operations(checks)
        results = self.cluster.run(ops)
        for request in checks:
            index = next(i for i, (_, op) in enumerate(ops[request.process]) if op[:2] == ("check", request.rid))
            self.checked(request, *results[request.process][index])
        # Every request admitted before or during the step was in flight during it.
        admitted = [r for r in checks if r.admitted]
        for request in [r for r in self.owing if r.process in visited]:
            request.charged_step = self.steps
            self.owing.remove(request)
        excess = sum(r.excess for r in self.in_flight + self.owing + admitted)
        self.outcome.bound = max(self.outcome.bound, excess)
        for request in list(self.settling):
            self.done(request)
        for request in admitted:
            if request.kind in ONE_OPERATION:
                request.settled_step = self.steps
            else:
                self.in_flight.append(request)
        self.steps += 1

    def operations(self, checks: list[Request]) -> dict[int, list[tuple[int, Op]]]:
        """The step's operations by process: the settlements due, ``checks`` (each in a lane of its process that
        holds no request), the poller's visits."""
        ops: dict[int, list[tuple[int, Op]]] = defaultdict(list)
        busy: dict[int, set[int]] = defaultdict(set)
        for request in self.in_flight:
            busy[request.process].add(request.lane)
        for request in self.settling:
            ops[request.process].append((request.lane, self.settle_op(request)))
        for request in checks:
            request.lane = min(set(range(LANES)) - busy[request.process])
            busy[request.process].add(request.lane)
            path = f"/p{request.price}/items"
            ops[request.process].append(
                (request.lane, ("check", request.rid, self.key, path, request.kind, request.actual))
            )
        for process in self.ticks:
            ops[process].append((min(set(range(LANES)) - busy[process]), ("tick",)))
        self.ticks = set()
        return ops

    @staticmethod
    def settle_op(request: Request) -> Op:
        return ("settle", request.rid, request.kind, request.actual)

    def checked(self, request: Request, admitted: bool, from_allowance: bool, estimate: int) -> None:
        """Note what checking ``request`` gave."""
        assert estimate == PRICES[request.price] or not admitted
        request.admitted, request.from_allowance, request.checked_step = admitted, from_allowance, self.steps
        if admitted:
            self.outcome.requests.append(request)
            if not from_allowance:
                self.last_redis_step = self.steps
            self.outcome.admitted += 1
            self.outcome.from_allowances += from_allowance
            self.outcome.actual += request.actual

    def done(self, request: Request) -> None:
        """``request`` was settled in the step under way."""
        request.settled_step = self.steps
        self.in_flight.remove(request)
        self.settling.remove(request)


def flatten(traffic: list[tuple[int, int, list[tuple[str, int, int, bool]], bool]]) -> list[Request]:
    """The drawn bursts as requests in order (a burst's first request starts a step of its own)."""
    flat: list[Request] = []
    for process, price, burst, tick in traffic:
        for i, (kind, fraction, overlap, together) in enumerate(burst):
            actual = actual_cost(kind, PRICES[price], fraction)
            flat.append(Request(len(flat), process, price, kind, overlap, together and i > 0, actual))
        flat[-1].tick_after = tick
    return flat


@pytest.fixture
def clients(transactional_db) -> dict[int, str]:
    """A plan pricing three paths, allowances on, and a subscription per budget amount: its API key by amount.
    Committed (transactional_db), so that the worker processes see them."""
    plan = PlanFactory(slug="metered", local_allowances=True)
    for i, price in enumerate(PRICES):
        EndpointLimitFactory(
            plan=plan,
            name=f"p{i}",
            path_prefix=f"/p{i}/",
            rates="1000000/hour",
            algorithm="fixed_window",
            price=from_micros(price),
            refund_on_error=i == 0,  # a 5xx on /p0/ gives its request back too
        )
    keys = {}
    for amount in AMOUNTS:
        subscription = SubscriptionFactory(plan=plan)
        CostBudget.objects.create(subscription=subscription, period="day", amount=Decimal(from_micros(amount)))
        keys[amount] = issue_key(subscription)
    return keys


@pytest.fixture
def cluster(clients, set_quotas, redis_client) -> Iterator[Cluster]:
    """The test's own server and two worker processes, allowances on for a client sending one request a second
    (so every decision Redis makes takes one), the poller's visits left to the draw (an hour apart otherwise)."""
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=1.0, HORIZON=1.0, SHARE=0.5, MAX_REQUESTS=20)
    set_quotas(RULES_CHECK_INTERVAL=3600)
    workers = Workers(WORKERS, django_settings.QUOTAS, connection.settings_dict["NAME"])
    own = Server()
    try:
        yield Cluster(own, workers)
    finally:
        workers.stop()
        own.close()


def budget_of(key: str) -> tuple[str, list]:
    """The client tag of API key ``key`` and its budget's windows, as the test process's rules have them."""
    runtime = default_engine.runtime()
    client = identify(RequestFactory().get("/p0/", HTTP_X_API_KEY=key), None, runtime.rules)
    assert client.subscriber is not None
    limits = runtime.rules.current().limits_for(client.subscriber.plan_id, client.subscriber)
    return client.tag, [w for rule in limits if rule.algorithm == "budget" for w in rule.windows]


@pytest.mark.redis
def test_budgets_hold_their_bound_count_actual_costs_and_alert_once(cluster, clients, redis_client, record_property):
    """Over the drawn examples (EXAMPLES): the bound, the spend and usage equal to the actual costs, one alert per
    threshold reached; most of the busy examples' admitted requests are served from allowances."""
    budgets = {amount: budget_of(key) for amount, key in clients.items()}
    version_key = rules_version_key(default_engine.runtime().prefix)
    totals: Counter[str] = Counter()

    # Function-scoped fixtures are shared by the examples on purpose (the processes); each example starts clean.
    # `make test` draws the same examples every run (as tests/quotas/test_money_machine.py does): the busy
    # requests of a new draw of 150 ranged from 496 (a red run, 2026-11-29) to 1,080 around BUSY_ADMITTED; the
    # nightly profile draws new ones each night.
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not NIGHTLY,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(amount=st.sampled_from(AMOUNTS), traffic=st.lists(bursts, min_size=1, max_size=6))
    # The review's case: requests one at a time, each costing four times its price, from allowances.
    @example(amount=AMOUNTS[0], traffic=[(0, 0, [("above", 100, 0, False)] * 12, False)])
    # What breaks the documented bound across processes (DOCUMENTED_BOUND_ACROSS_PROCESSES): process 0 takes an
    # allowance of two requests at 0.012 (SHARE leaves no more of 0.04), process 1 one at 0.002, then spends it on
    # three requests in flight together that cost 0.008001 each (over the budget, with 0.018003 in flight); once
    # they are settled, process 0 serves its second request, which costs 0.048001, from the allowance it took
    # first. The budget ends 0.048004 over; the documented bound is 0.036001.
    @example(
        amount=AMOUNTS[0],
        traffic=[
            (0, 2, [("equal", 0, 0, False)], False),
            (
                1,
                0,
                [("equal", 0, 0, False), *[("above", 100, 0, i > 0) for i in range(3)], ("equal", 0, 0, False)],
                False,
            ),
            (0, 2, [("above", 100, 0, False)], False),
        ],
    )
    def holds(amount: int, traffic: list) -> None:
        cluster.everywhere(("reset",))
        version = redis_client.get(version_key)
        redis_client.flushall()
        if version is not None:  # no process sees a change of rules (it would end their allowances)
            redis_client.set(version_key, version)
        Event.objects.all().delete()
        BudgetAlert.objects.all().delete()

        outcome = Traffic(cluster, clients[amount], redis_client).send(flatten(traffic))
        signals: Counter[int] = Counter()
        for sent in cluster.everywhere(("finish",)):
            signals.update(sent)

        tag, windows = budgets[amount]
        spent = default_engine.runtime().guard.peek(tag, windows).states[0].used
        assert spent == outcome.actual  # every admitted request charged its actual cost, once
        assert spent <= amount + outcome.redis_bound
        if DOCUMENTED_BOUND_ACROSS_PROCESSES or len({r.process for r in outcome.requests}) == 1:
            assert spent <= amount + outcome.bound  # in one process, the first upward reconciliation ends them all
        assert usage_totals(redis_client).get("c", 0) == outcome.actual
        assert_one_alert_per_threshold(amount, spent, signals)
        totals["examples"] += 1
        totals["admitted"] += outcome.admitted
        totals["from_allowances"] += outcome.from_allowances
        if outcome.admitted >= BUSY:
            totals["busy_admitted"] += outcome.admitted
            totals["busy_from_allowances"] += outcome.from_allowances

    holds()
    share = totals["from_allowances"] / max(1, totals["admitted"])
    busy_share = totals["busy_from_allowances"] / max(1, totals["busy_admitted"])
    report = (
        f"{totals['examples']} examples: {totals['from_allowances']} of {totals['admitted']} admitted requests "
        f"served from allowances ({share:.0%}); in examples of {BUSY} or more, {totals['busy_from_allowances']} "
        f"of {totals['busy_admitted']} ({busy_share:.0%})"
    )
    record_property("allowance_share", report)  # tests/conftest.py prints it in the run's summary
    assert totals["busy_admitted"] >= BUSY_ADMITTED, report  # enough busy examples for the share to mean something
    assert busy_share >= LEAST_SHARE, report


def assert_one_alert_per_threshold(amount: int, spent: int, signals: Counter) -> None:
    """Each threshold signalled at most once, recorded (Event, BudgetAlert) as often as signalled, and recorded
    once if the final spend reached it."""
    events = Counter(e.data["threshold"] for e in Event.objects.filter(type=BUDGET_THRESHOLD))
    alerts = Counter(BudgetAlert.objects.values_list("threshold", flat=True))
    reached = {80: spent * 5 >= amount * 4, 100: spent >= amount}
    for threshold in (80, 100):
        assert signals[threshold] <= 1, (threshold, signals)
        assert events[threshold] == alerts[threshold] == signals[threshold], (threshold, events, alerts, signals)
        if reached[threshold]:
            assert events[threshold] == 1, (threshold, spent, amount)
