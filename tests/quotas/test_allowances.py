"""Local allowances: a busy client's requests admitted in process, every limit still exact (real Redis)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import fields

import pytest
import redis
from rest_framework.test import APIClient

from config.embedded_redis import RedisServer
from quotas.engine import Engine, default_engine
from quotas.formats.rates import Rate, parse_rates
from quotas.http.headers import rate_limit_headers
from quotas.rules.limits import LimitRule
from quotas.store.decision import DecideCall, Decision
from quotas.store.served import served_states
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.script_calls import script_calls
from tests.usage_counters import usage_totals

#: Every algorithm an allowance serves, as a plan limit names it.
ALGORITHMS = ["fixed_window", "sliding_window_counter", "sliding_window_log", "token_bucket", "leaky_bucket"]
PROCESSES = 8


@pytest.fixture
def busy(set_quotas):
    """Allowances for a client sending 2 requests within 0.1 s (1 alone reads as 10 a second), up to 10 requests."""
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=15, HORIZON=1.0, SHARE=0.5, MAX_REQUESTS=10)


def windows(rate: str, algorithm: str = "fixed_window", **extra):
    return LimitRule(id="a", name="a", rates=parse_rates(rate), algorithm=algorithm, **extra).windows


def ask(tag: str, wins, **options):
    """One request's decision as the service asks it: allowances allowed."""
    return default_engine.runtime().guard.decide_call(DecideCall(tag, wins, allowance_ok=True, **options))


@pytest.mark.redis
def test_a_busy_client_is_admitted_from_an_allowance_without_redis(busy, redis_client):
    """After the first request, the next asks for 10 requests' units at once; 9 more need no Redis call."""
    wins = windows("1000/hour")
    assert ask("{c}", wins).granted == 1  # one request is not busy
    redis_client.config_resetstat()
    decisions = [ask("{c}", wins) for _ in range(10)]
    assert all(d.allowed for d in decisions)
    assert [d.allowance for d in decisions] == [False] + [True] * 9
    assert decisions[0].granted == 10
    assert script_calls(redis_client) == 1
    # The window holds all 11 requests' units; each request's headers count what the client has left, the
    # units this process holds for it included: down by one a request.
    assert [d.states[0].remaining for d in decisions] == list(range(998, 988, -1))
    assert default_engine.runtime().guard.peek("{c}", wins).states[0].remaining == 989


@pytest.mark.redis
@pytest.mark.parametrize("legacy", [True, False])
@pytest.mark.parametrize("weight", [None, 1, 3])
def test_served_headers_are_those_of_the_general_path(busy, settings, legacy, weight):
    """A served decision's headers, put together from texts kept once per allowance, are byte for byte those
    the general path builds from its states: every window and algorithm, weighted or not, periods included."""
    settings.QUOTAS = {**settings.QUOTAS, "LEGACY_HEADERS": legacy}
    rules = [
        LimitRule(id="r", name='we"ird%d', rates=parse_rates("1000/second;5000/minute"), algorithm="token_bucket"),
        LimitRule(id="f", name="fixed", rates=parse_rates("3000/hour"), algorithm="fixed_window"),
        LimitRule(id="p", name="period", rates=(Rate(100000, 86400),), algorithm="period_quota", period="day"),
        LimitRule(id="q", name="requests", rates=(Rate(100000, 86400),), algorithm="period_requests", period="day"),
        *(LimitRule(id=a[:8], name=a, rates=parse_rates("2000/minute"), algorithm=a) for a in ALGORITHMS),
    ]
    wins = [w for rule in rules for w in rule.windows]
    served = [d for d in (ask("{h}", wins, weight=weight) for _ in range(12)) if d.allowance]
    assert len(served) >= 5
    for decision in served:
        # Every field set (read without an AttributeError), the states made when first read.
        assert type(decision)(decision, decision.basis, decision.ahead, decision.elapsed_us, decision.memo)
        assert {f.name: getattr(decision, f.name) for f in fields(Decision)}
        for s in decision.states:
            assert s.quota == s.window.quota
        plain = as_plain(decision)  # read from its states
        assert decision.readings() == plain.readings()
        assert rate_limit_headers(decision) == rate_limit_headers(plain)
    assert served[0].memo is served[-1].memo  # the texts are worked out once an allowance
    assert served[0].memo["headers"]


def as_plain(served: Decision) -> Decision:
    """A plain Decision with ``served``'s fields, its states made, no memo."""
    return Decision(**{**{f.name: getattr(served, f.name) for f in fields(Decision)}, "memo": None})


@pytest.mark.redis
def test_a_served_decisions_states_are_made_when_first_read(busy):
    """Its headers need no state (past the allowance's first, whose texts are kept): the states are made when first
    read, as the allowance's states for that request are, and kept."""
    wins = windows("1000/hour")
    ask("{l}", wins)
    ask("{l}", wins)  # takes the allowance
    rate_limit_headers(ask("{l}", wins))  # the allowance's texts, worked out once
    served = ask("{l}", wins)
    assert served.allowance
    entries = rate_limit_headers(served)
    with pytest.raises(AttributeError):  # not made
        Decision.__dict__["states"].__get__(served, type(served))
    states = served.states
    assert states is served.states
    assert states == served_states(served.basis, served.ahead, served.elapsed_us, False)
    assert [s.remaining for s in states] == [1000 - 4]  # its 4th request
    assert entries == rate_limit_headers(as_plain(served))


def test_an_allowance_is_sized_by_every_request_of_the_client_not_only_those_that_reach_redis(set_quotas):
    """The client's rate counts the requests its allowances served. The first request reads as 10 a second
    (one within the shortest span, 0.1 s) and takes 10 requests' units; the next call to Redis comes after 11
    requests, so it asks for at least 22 (11 in at most half a second). Counting only the calls that reached
    Redis (2) would ask for 20 at most: allowances stuck near the square root of rate x horizon."""
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=1, HORIZON=1.0, SHARE=0.5, MAX_REQUESTS=1000)
    wins = windows("100000/hour")
    # The engine's clock stands still (quota_clock): the 12 requests come within one instant, whatever the machine.
    decisions = [ask("{c}", wins) for _ in range(12)]
    grants = [d.granted for d in decisions if not d.allowance]
    assert grants[0] == 10
    assert [d.allowance for d in decisions] == [False] + [True] * 9 + [False, True]
    assert grants[1] > 20


def test_an_allowance_is_cut_to_a_share_of_what_is_left(busy):
    """With 9 left after the request, half of that (4) plus the request itself: 5 requests' units."""
    wins = windows("20/hour")
    assert default_engine.runtime().guard.decide("{c}", wins, weight=10).allowed  # 10 left
    ask("{c}", wins, weight=1)  # busy from the next request on; 9 left
    decision = ask("{c}", wins, weight=1)
    assert decision.granted == 1 + (9 - 1) // 2


def test_refusals_stay_exact_when_the_allowance_is_spent(busy):
    """20 requests for a limit of 12: 12 admitted, allowances or not, then refusals from Redis as before."""
    wins = windows("12/hour")
    outcomes = [ask("{c}", wins).allowed for _ in range(20)]
    assert outcomes == [True] * 12 + [False] * 8


def test_unused_units_go_back_when_the_allowance_ends(busy):
    """The units an allowance did not use return to the window: the next client decision sees them."""
    wins = windows("100/hour")
    ask("{c}", wins)
    granted = ask("{c}", wins)
    assert granted.granted == 10
    runtime = default_engine.runtime()
    assert runtime.guard.peek("{c}", wins).states[0].remaining == 100 - 11
    runtime.settle_allowances(everything=True)
    assert runtime.guard.peek("{c}", wins).states[0].remaining == 100 - 2


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_usage_counts_each_request_once(busy, redis_client, algorithm):
    """Usage counts the requests made, not the units an allowance took: 30 admitted, 30 counted."""
    wins = windows("1000/hour", algorithm)
    runtime = default_engine.runtime()
    for _ in range(30):
        assert ask("{s.1}", wins, usage="1|-").allowed
    runtime.settle_allowances(everything=True)
    assert runtime.guard.usage.flush_usage()
    day = time.strftime("%Y%m%d", time.gmtime())
    keys = runtime.store.keys_of("{s.1}")
    assert int(redis_client.hget(f"{keys.usage_base}:{day}", f"{keys.field_prefix}1|-|a")) == 30


def test_a_fixed_window_allowance_ends_with_its_window(busy):
    """An allowance never outlives the window it was taken in."""
    wins = windows("1000/s")
    ask("{c}", wins)
    decision = ask("{c}", wins)
    if decision.granted > 1:
        allowance = next(iter(default_engine.runtime().guard.allowances._by_key.values()))
        now_us = int(decision.now * 1_000_000)
        left = 1 - (now_us % 1_000_000) / 1_000_000
        assert allowance.ends_at - allowance.started <= left + 1e-6


@pytest.mark.parametrize(
    "wins",
    [
        windows("5/min", "concurrency"),
        windows("1000/min", "leaky_bucket", max_delay=1.0),
        windows("100/min", shadow=True),
    ],
    ids=["concurrency", "shaping", "shadow"],
)
@pytest.mark.redis
def test_no_allowance_where_each_request_must_be_seen(busy, redis_client, wins):
    """A lease, a shaping delay or a shadow window needs every request in Redis."""
    redis_client.config_resetstat()
    for _ in range(5):
        ask("{c}", wins, request_id="r")
    assert script_calls(redis_client) == 5


@pytest.mark.redis
def test_no_allowance_when_turned_off(set_quotas, redis_client):
    set_quotas("ALLOWANCES", ENABLED=False, MIN_RATE=1)
    wins = windows("1000/hour")
    redis_client.config_resetstat()
    for _ in range(10):
        ask("{c}", wins)
    assert script_calls(redis_client) == 10


def _race(wins, attempts, cost, seconds, barrier, results, actual=None):
    """One OS process: wait for the others, then send ``attempts`` requests (or for ``seconds``) as fast as it
    can, each reconciled to ``actual`` after its "view" if given; reports when each admission happened, then
    shuts down gracefully (allowances settled, usage written).

    Each admission is reported as the span it certainly happened in: Redis's time for a decision Redis made;
    for one served from an allowance, the wall clock just before and just after the call (8 processes share
    2 cores, so a process can be preempted between its first reading and the serve)."""
    # An engine of this process's own: the parent's runtime is left alone, not closed here (a lock one of the
    # parent's threads held at the fork would never be released in this process).
    runtime = Engine().runtime()
    store = runtime.guard
    barrier.wait()
    admitted, served, sent, until = [], 0, 0, time.time() + seconds
    while sent < attempts or time.time() < until:
        asked = time.time()
        decision = store.decide_call(DecideCall("{raced}", wins, cost_micros=cost, usage="1|-", allowance_ok=True))
        sent += 1
        if decision.allowed:
            admitted.append((asked, time.time()) if decision.allowance else (decision.now, decision.now))
            if actual is not None:
                store.settlement.reconcile(decision, actual)  # what settling does after the view reports its cost
        served += decision.allowance
    runtime.close()
    results.put((admitted, served))


def _run_race(wins, attempts=0, cost=0, seconds=0.0, actual=None):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    args = (wins, attempts, cost, seconds, barrier, results, actual)
    procs = [ctx.Process(target=_race, args=args) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=10)
        assert p.exitcode == 0
    return sorted(t for times, _ in outcomes for t in times), sum(served for _, served in outcomes)


def _usage_admitted(redis_client) -> int:
    keys = default_engine.runtime().store.keys_of("{raced}")
    day = time.strftime("%Y%m%d", time.gmtime())
    return int(redis_client.hget(f"{keys.usage_base}:{day}", f"{keys.field_prefix}1|-|a") or 0)


@pytest.fixture
def racing(set_quotas):
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=1, HORIZON=0.25, SHARE=0.1, MAX_REQUESTS=50)


BUDGET = LimitRule(id="b", name="b", rates=(Rate(100 * 5_000, 86400),), algorithm="budget", period="day")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("wins", "cost"),
    [*((windows("100/day", a), 0) for a in ALGORITHMS), (BUDGET.windows, 5_000)],
    ids=[*ALGORITHMS, "budget"],
)
@pytest.mark.redis
def test_eight_processes_racing_one_client_admit_at_most_the_limit(racing, redis_client, wins, cost):
    """8 processes x 60 requests against 100 a day (or a budget of 100 requests' price) with allowances on: never
    more than 100 admitted; once every process has shut down gracefully (its allowances' unused units given
    back), exactly the rest is admissible, and usage counts exactly the requests admitted.

    A day's window, so that no race crosses a window's end or sees a bucket refill (a loaded machine can stretch
    a race over seconds); the rest is counted after the race, not bounded during it, as how many requests a
    process serves from an allowance before it ends depends on the scheduler (92 of 100 once, under load)."""
    admitted, from_allowances = _run_race(wins, attempts=60, cost=cost)
    assert len(admitted) <= 100
    assert from_allowances > 0
    assert _usage_admitted(redis_client) == len(admitted)
    guard = default_engine.runtime().guard
    rest = 0
    while guard.decide_call(DecideCall("{raced}", wins, cost_micros=cost, usage="1|-")).allowed and rest <= 100:
        rest += 1
    assert len(admitted) + rest == 100


@pytest.mark.redis
@pytest.mark.slow
def test_eight_processes_whose_requests_cost_more_than_estimated_keep_the_budget_bound(set_quotas, redis_client):
    """8 processes x 60 requests estimated at 0.005 that cost 0.05, against a budget of 0.50: each upward
    reconciliation ends that process's allowance, so the budget is overspent by at most one request in flight
    per process (8 x 0.045), and each admitted request is charged its actual cost once. Allowances are tuned to
    be as large as they can (a whole budget's worth)."""
    set_quotas("ALLOWANCES", ENABLED=True, MIN_RATE=1, HORIZON=1.0, SHARE=1.0, MAX_REQUESTS=100)
    admitted, _ = _run_race(BUDGET.windows, attempts=60, cost=5_000, actual=50_000)
    spent = default_engine.runtime().guard.peek("{raced}", BUDGET.windows).states[0].used
    assert spent == 50_000 * len(admitted)
    assert spent <= 500_000 + PROCESSES * 45_000
    # Without ending allowances on an upward reconciliation: 40 admitted, 2.00 spent. With it, fewer than the
    # budget's 10 may be admitted: units an ended allowance holds back go back only with the poller.
    assert admitted


@pytest.mark.redis
@pytest.mark.slow
def test_no_fixed_window_admits_more_than_its_limit_across_its_edges(racing, redis_client):
    """For 2.5 s of a race, 8 processes against 30 a second: no second admits more than 30."""
    admitted, from_allowances = _run_race(windows("30/s"), seconds=2.5)
    per_second: dict[int, int] = {}
    for first, last in admitted:
        if int(first) == int(last):  # certainly in that second (see _race)
            per_second[int(first)] = per_second.get(int(first), 0) + 1
    assert max(per_second.values()) <= 30
    assert len(per_second) >= 3
    assert from_allowances > 0
    assert _usage_admitted(redis_client) == len(admitted)


@pytest.mark.redis
@pytest.mark.slow
def test_no_second_of_a_sliding_log_admits_more_than_its_limit(racing, redis_client):
    """For 2.5 s of a race against a 30-a-second sliding log: no interval of a second admits more than 30."""
    admitted, from_allowances = _run_race(windows("30/s", "sliding_window_log"), seconds=2.5)
    # Admissions certainly inside [t, t + 1) (see _race), for every t an admission certainly happened after.
    most = max(sum(1 for first, last in admitted if t <= first and last < t + 1) for t, _ in admitted)
    assert most <= 30
    assert from_allowances > 0


def _killed(wins, pipe):
    store = Engine().runtime().guard  # this process's own (see _race)
    decisions = [store.decide_call(DecideCall("{raced}", wins, usage="1|-", allowance_ok=True)) for _ in range(6)]
    pipe.send((sum(d.allowed for d in decisions), max(d.granted for d in decisions)))
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.slow
def test_a_killed_process_loses_at_most_one_allowance_of_usage_and_never_adds_any(busy, redis_client):
    """SIGKILL before the poller wrote them: the requests served from the allowance are not counted (at most
    MAX_REQUESTS - 1 of them), the others are; nothing is counted that was not admitted."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_killed, args=(windows("1000/hour"), child))
    process.start()
    admitted, granted = parent.recv()
    process.join(timeout=10)
    assert process.exitcode == -signal.SIGKILL
    assert granted > 1
    counted = _usage_admitted(redis_client)
    assert admitted - (10 - 1) <= counted < admitted


@pytest.mark.redis
@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
@pytest.mark.parametrize("on", [True, False], ids=["plan allows", "plan turns them off"])
def test_a_busy_api_client_over_http(busy, redis_client, quota_clock, on):
    """Through the DRF throttle: 20 requests in a burst need a few decisions in Redis (until the client reads
    as busy, then one per allowance of 10), RateLimit's remaining counts down by one a request, and usage counts
    every request. A plan with allowances off asks Redis for every request."""
    plan = PlanFactory(slug="free", is_default=True, local_allowances=on)
    EndpointLimitFactory(plan=plan, name="burst", rates="1000/hour", algorithm="fixed_window")
    key = issue_key(plan=plan)
    client = APIClient()
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200  # loads rules and scripts
    quota_clock.advance(0.2)  # one request in the span: not busy yet
    redis_client.config_resetstat()
    responses = [client.get("/api/demo/ping", HTTP_X_API_KEY=key) for _ in range(20)]
    assert [r.status_code for r in responses] == [200] * 20
    remaining = [int(r.headers["RateLimit"].split(";r=")[1].split(";")[0]) for r in responses]
    assert remaining == list(range(998, 978, -1))
    calls = script_calls(redis_client)
    assert calls <= 6 if on else calls == 20
    runtime = default_engine.runtime()
    runtime.settle_allowances(everything=True)
    assert runtime.guard.usage.flush_usage()
    assert usage_totals(redis_client)["a"] == 21


@pytest.mark.slow
def test_usage_is_exact_across_a_redis_restart(busy, set_quotas, tmp_path):
    """Requests admitted from an allowance while Redis restarts are counted once it is back: the settlement
    that failed keeps its counts for the poller's next write. (Redis itself keeps what it had with AOF.)"""
    server = RedisServer(data_dir=tmp_path, appendonly=True).start()
    try:
        set_quotas(REDIS_URL=server.url)
        wins = windows("1000/hour")
        runtime = default_engine.runtime()
        decisions = [ask("{s.1}", wins, usage="1|-") for _ in range(8)]
        assert all(d.allowed for d in decisions)
        assert any(d.allowance for d in decisions)
        server.stop()
        runtime.settle_allowances(everything=True)  # giving back the unused units fails: logged, counted
        assert not runtime.guard.usage.flush_usage()  # the usage of the requests served in process waits
        server.start()
        assert runtime.guard.usage.flush_usage()
        client = redis.Redis.from_url(server.url)
        try:
            assert usage_totals(client)["a"] == 8
        finally:
            client.close()
    finally:
        default_engine.reset()
        server.stop()


def test_headers_from_an_allowance_are_high_by_at_most_what_others_spent_meanwhile(busy):
    """Another process spending 7 units meanwhile is not seen by this one's headers: they are high by
    exactly those 7, the documented bound; the shared count is exact."""
    wins = windows("1000/hour")
    ask("{c}", wins)
    granted = ask("{c}", wins)
    assert granted.granted == 10
    runtime = default_engine.runtime()
    runtime.store.decide(DecideCall("{c}", wins, weight=7))  # another process's requests, straight to Redis
    served = ask("{c}", wins)
    assert served.allowance
    shared_left = runtime.guard.peek("{c}", wins).states[0].remaining  # all 10 units of the allowance taken
    unused_here = granted.granted - 2  # two of the allowance's requests made
    assert served.states[0].remaining - (shared_left + unused_here) == 7


def test_what_a_live_allowance_served_reaches_redis_at_the_next_tick(busy, redis_client):
    """The poller counts the requests a live allowance served so far at every tick, not when the allowance
    ends: a flush right after a burst finds them. Counted once each, however many ticks see the allowance,
    and the wait is measured (quota_usage_write_lag_seconds)."""
    from prometheus_client import REGISTRY

    def lag_count() -> float:
        return REGISTRY.get_sample_value("quota_usage_write_lag_seconds_count") or 0.0

    wins = windows("1000/hour")
    runtime = default_engine.runtime()
    day = time.strftime("%Y%m%d", time.gmtime())
    keys = runtime.store.keys_of("{s.1}")

    def counted() -> int:
        return int(redis_client.hget(f"{keys.usage_base}:{day}", f"{keys.field_prefix}1|-|a") or 0)

    for _ in range(6):
        assert ask("{s.1}", wins, usage="1|-").allowed
    assert runtime.guard.allowances.live()  # the allowance (10 requests, for 1 s) is still in use
    observed = lag_count()
    runtime.tick()  # what the poller does every RULES_CHECK_INTERVAL
    assert counted() == 6
    assert lag_count() == observed + 1
    for _ in range(2):
        assert ask("{s.1}", wins, usage="1|-").allowed
    runtime.tick()
    assert counted() == 8
    runtime.settle_allowances(everything=True)
    assert runtime.guard.usage.flush_usage()
    assert counted() == 8  # nothing counted twice when it ends


def test_a_grant_asked_for_before_a_cost_above_its_estimate_ended_the_clients_allowances_serves_nothing(
    busy, quota_clock
):
    """A request settled above its estimate ends the client's allowances; a grant whose call was already on its
    way to Redis then (Redis may have sized it without that cost) is given back unused, and the next request
    asks Redis. The budget property test found the overspend past its one-moment bound without this."""
    wins = windows("100/hour")
    ask("{c}", wins)
    runtime = default_engine.runtime()
    allowances = runtime.guard.allowances
    asked = quota_clock.monotonic()
    allowances.end_client("{c}")  # another thread's request settled above its estimate meanwhile
    call = DecideCall("{c}", wins, allowance_ok=True)
    call.allowance = (10, allowances.share, allowances.end_us)
    decision = runtime.guard.store.decide(call)
    assert decision.granted == 10
    allowances.grant(call, decision, asked)
    assert allowances.take(DecideCall("{c}", wins, allowance_ok=True)) is None
    runtime.settle_allowances()
    assert runtime.guard.peek("{c}", wins).states[0].remaining == 100 - 2  # its 9 unused units went back
    # A grant asked for after the cut (a moment later: one asked at the cut's moment counts as before it) is
    # served from as before.
    quota_clock.advance(0.001)
    assert ask("{c}", wins).allowed
    assert ask("{c}", wins).allowance


@pytest.mark.redis
def test_a_request_like_the_last_grants_is_served_from_it_and_an_unlike_one_is_not(busy, redis_client):
    """The client's last allowance serves a request with the same windows and options, whether it names them
    with the same tuple or an equal one; a request with another weight or usage gets an allowance of its own, as
    does one whose windows are a list made for it (a list's key is its windows' fields, a tuple's a string of them,
    kept), which then serves such requests."""
    wins = windows("1000/hour")
    decisions = [ask("{c}", wins) for _ in range(3)]
    assert decisions[-1].allowance
    redis_client.config_resetstat()
    assert ask("{c}", windows("1000/hour")).allowance  # equal windows, another tuple: the same allowance
    assert script_calls(redis_client) == 0
    assert [ask("{c}", list(wins)).allowance for _ in range(3)] == [False, True, True]
    assert script_calls(redis_client) == 1
    redis_client.config_resetstat()
    other = ask("{c}", wins, weight=2)
    assert not other.allowance
    assert ask("{c}", wins, usage="1|-").allowance is False
    assert script_calls(redis_client) == 2
    assert ask("{c}", wins).allowance  # the first allowance still serves
    assert script_calls(redis_client) == 2
