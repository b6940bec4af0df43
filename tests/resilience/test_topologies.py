"""The engine on a real Redis Cluster (3 primaries) and a real Sentinel group: same decisions, same exactness.

Every test here builds the engine from ``REDIS_URL`` alone (``redis+cluster://``
or ``redis+sentinel://``, see quotas/store/backends/connect.py) through ``override_settings``.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from datetime import UTC, datetime

import pytest
from kombu import Connection

from quotas.contract.keys import refusals_key
from quotas.engine import default_engine
from quotas.exceptions import StoreUnavailable
from quotas.formats.rates import Rate, parse_rates
from quotas.formats.store_urls import celery_sentinel_broker
from quotas.observability.refusals import read_refusals
from quotas.rules.limits import LimitRule
from quotas.store.history_store import read_history, read_top_clients
from quotas.store.refusal_lists import RefusalLists
from quotas.store.usage_hash_format import scan_usage_keys
from tests.script_calls import script_calls
from tests.store_client import client_of
from usage.flush import flush_usage
from usage.models import UsageRecord

from .servers import Cluster, wait_until

ALL = ["fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket"]
T0 = 1_700_000_040.0  # aligned to a minute and to 10 seconds
PREFIX = "quota:v1"


def rule(algorithm: str, rates: str, **kwargs) -> LimitRule:
    return LimitRule(id=kwargs.pop("id", "l1"), name=kwargs.pop("name", "test"), rates=parse_rates(rates),
                     algorithm=algorithm, **kwargs)  # fmt: skip


def admitted(runtime, windows, times, tag="{c}", **kwargs) -> list[bool]:
    return [runtime.guard.decide(tag, windows, now=t, **kwargs).allowed for t in times]


# (a) Decisions at one instant ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALL)
def test_every_algorithm_admits_exactly_its_limit(topo_runtime, algorithm):
    """5/10s at one instant: exactly 5 admitted, then refusals, on either topology."""
    windows = rule(algorithm, "5/10s").windows
    assert admitted(topo_runtime, windows, [T0] * 7) == [True] * 5 + [False] * 2


def test_all_or_nothing_across_limits_and_windows(topo_runtime):
    """A refusal by one limit spends nothing from the others (hash fields and a sliding log's own key)."""
    wide = rule("fixed_window", "3/s; 100/min", id="wide").windows
    narrow = rule("sliding_window_log", "2/min", id="narrow").windows
    assert admitted(topo_runtime, wide + narrow, [T0] * 5) == [True, True, False, False, False]
    alone = topo_runtime.guard.decide("{c}", wide, now=T0)
    assert [s.remaining for s in alone.states] == [0, 100 - 3]  # 2 before + this one; the refusals spent nothing


def test_a_sliding_log_key_lives_in_the_clients_slot(topology, topo_runtime):
    """The log's own key and the client's hash hash to one slot (one script call, valid on a cluster)."""
    windows = rule("sliding_window_log", "3/min", id="log").windows
    assert admitted(topo_runtime, windows, [T0] * 4) == [True, True, True, False]
    keys = topo_runtime.store.script_keys(topo_runtime.store.keys_of("{c}"), windows)
    client = client_of(topo_runtime)
    assert client.zcard(keys[-1]) == 3  # refused requests are never logged
    if topology.name == "cluster":
        node = topology.servers.nodes[0].client()
        try:
            assert len({node.execute_command("CLUSTER KEYSLOT", k) for k in keys}) == 1
        finally:
            node.close()


def test_a_budget_spends_cost_micros(topo_runtime):
    """A 100-micro daily budget admits 3 requests of 30, refuses the 4th, and reports what was spent."""
    budget = LimitRule(id="b1", name="day-budget", rates=(Rate(100, 86400),), algorithm="budget", period="day")
    decisions = [topo_runtime.guard.decide("{c}", budget.windows, now=T0, cost_micros=30) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[2].states[0].used == 90
    assert decisions[3].budget_denied


# (b) 8 OS processes against one limit -------------------------------------------------------------------------------


def _hammer(windows, attempts, barrier, results):
    """One forked process: the engine inherited from the parent (its pools reconnect after fork)."""
    runtime = default_engine.runtime()
    barrier.wait()
    results.put(sum(runtime.guard.decide("{hammered}", windows, now=T0).allowed for _ in range(attempts)))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALL)
def test_eight_processes_admit_exactly_the_limit(topo_runtime, algorithm):
    """8 processes x 40 attempts against 100/min: exactly 100 admitted, on either topology."""
    windows = rule(algorithm, "100/min", id="conc").windows
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(windows, 40, barrier, results)) for _ in range(8)]
    for p in procs:
        p.start()
    counts = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=10)
        assert p.exitcode == 0
    assert sum(counts) == 100


# (c) Clients on every cluster primary -------------------------------------------------------------------------------


def test_clients_on_every_primary_are_decided_on_their_own_node(cluster, runtime_on):
    """Tags spread over the 3 primaries: each client's keys land on the primary that serves its slot."""
    runtime = runtime_on(cluster.url)
    client = client_of(runtime)
    by_port: dict[int, list[str]] = {}
    i = 0
    while min((len(v) for v in by_port.values()), default=0) < 2 or len(by_port) < 3:
        tag = f"{{s.{i}}}"
        by_port.setdefault(client.get_node_from_key(runtime.store.keys_of(tag).bucket).port, []).append(tag)
        i += 1
    assert sorted(by_port) == sorted(n.port for n in cluster.nodes)
    windows = rule("sliding_window_log", "2/min").windows + rule("token_bucket", "3/min", id="l2").windows
    for tags in by_port.values():
        for tag in tags[:2]:
            assert admitted(runtime, windows, [T0] * 3, tag=tag) == [True, True, False]
    for node in cluster.nodes:
        direct = node.client()
        try:
            for tag in by_port[node.port][:2]:
                key = runtime.store.keys_of(tag).bucket
                assert direct.execute_command("CLUSTER KEYSLOT", key) == client.keyslot(key)
                own = runtime.store.script_keys(runtime.store.keys_of(tag), windows)[2:]
                assert direct.exists(key, *own) == 2  # bucket and log, here
        finally:
            direct.close()


# (d) Sentinel failover under traffic --------------------------------------------------------------------------------


def _script_calls(server) -> int:
    client = server.client()
    try:
        return script_calls(client)
    finally:
        client.close()


class _Traffic:
    """A thread deciding for one client non-stop, while in a ``with`` block: each outcome is "ok" or the exception."""

    def __init__(self, runtime, windows) -> None:
        self.outcomes: list[object] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(runtime, windows), daemon=True)

    def run(self, runtime, windows) -> None:
        while not self.stop.is_set():
            try:
                runtime.guard.decide("{failover}", windows)
                self.outcomes.append("ok")
            except Exception as exc:  # StoreUnavailable is expected; anything else fails the test
                self.outcomes.append(exc)
            time.sleep(0.002)

    def oks(self) -> int:
        return self.outcomes.count("ok")

    def __enter__(self) -> _Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def _fail_primary(sentinel_group, port: int, how: str) -> None:
    """Make the primary on ``port`` fail: SIGKILL, or a SENTINEL FAILOVER."""
    if how == "kill-9":
        sentinel_group.server(port).stop(kill=True)
        return
    sentinel = sentinel_group.sentinels[0].client()
    try:
        assert sentinel.execute_command("SENTINEL FAILOVER", "mymaster")
    finally:
        sentinel.close()


def _restore_old_primary(sentinel_group, old: int, new: int, how: str) -> None:
    """The old primary back as a replica of the new one (``new``, 0 if none was elected), for the tests that follow.

    Sentinel would demote a live old primary itself, but only some 8 s later: do what it will do, now.
    """
    if how == "kill-9":
        sentinel_group.server(old).start()
    elif new:
        demoted = sentinel_group.server(old).client()
        try:
            demoted.replicaof("127.0.0.1", new)
        finally:
            demoted.close()
    sentinel_group.wait_healthy(20, sentinel_link_status=False)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sentinel-failover", "kill-9"])
def test_decisions_follow_a_sentinel_failover(sentinel_group, runtime_on, how):
    """While a thread decides non-stop, the primary fails over (SENTINEL FAILOVER, or SIGKILL).

    Decisions may fail for a moment, only ever with StoreUnavailable, and are
    decided by the new primary within 15 s of the failure, even when the old
    primary is still alive (Sentinel demotes it only seconds later).
    """
    sentinel_group.flushall()
    runtime = runtime_on(sentinel_group.url)
    windows = rule("fixed_window", "1000000/min", id="fo").windows  # never refuses: only failures show
    old, new = sentinel_group.primary_port(), 0
    try:
        with _Traffic(runtime, windows) as traffic:
            wait_until(lambda: traffic.oks() >= 20, 5, "traffic to flow")
            failed_at = time.monotonic()
            _fail_primary(sentinel_group, old, how)
            new = wait_until(lambda: (port := sentinel_group.primary_port()) != old and port, 15, "a new primary")
            new_primary = sentinel_group.server(new)
            wait_until(lambda: _script_calls(new_primary) > 0, 15, "decisions on the new primary")
            resumed_after = time.monotonic() - failed_at
            calls, oks = _script_calls(new_primary), traffic.oks()
            time.sleep(1.0)  # longer than the circuit breaker's probe interval (0.5 s) after a stray failure
            assert _script_calls(new_primary) > calls  # and they keep going there
            assert traffic.oks() > oks
    finally:
        _restore_old_primary(sentinel_group, old, new, how)
    unexpected = [repr(o) for o in traffic.outcomes if o != "ok" and not isinstance(o, StoreUnavailable)]
    assert not unexpected
    assert resumed_after < 15


def test_celery_reaches_the_primary_through_the_sentinels(sentinel_group):
    """The broker URL and options made from REDIS_URL carry a message through kombu's Sentinel transport."""
    broker, options = celery_sentinel_broker(sentinel_group.url)
    with Connection(broker, transport_options=options, connect_timeout=2) as connection:
        queue = connection.SimpleQueue("resilience-test")
        try:
            queue.put({"hello": "sentinel"})
            assert queue.get(timeout=5).payload == {"hello": "sentinel"}
        finally:
            queue.clear()
            queue.close()


# (e) Usage on a cluster ---------------------------------------------------------------------------------------------


def test_local_usage_is_written_to_every_node(topology, topo_runtime):
    """The guard's flush_usage pipelines HINCRBYs for clients on every primary (a non-transactional pipeline)."""
    tags = [f"{{s.{i}}}" for i in range(30)]
    for tag in tags:
        assert topo_runtime.guard.decide_locally(tag, (), None, 0, "1|-").allowed  # counted in-process, as in an outage
    assert topo_runtime.guard.usage.flush_usage()
    day = time.strftime("%Y%m%d", time.gmtime())
    client = client_of(topo_runtime)
    keys = [topo_runtime.store.keys_of(t) for t in tags]
    assert all(client.hget(f"{k.usage_base}:{day}", f"{k.client}|1|-|a") == b"1" for k in keys)
    if topology.name == "cluster":
        assert len({client.get_node_from_key(topo_runtime.store.keys_of(t).bucket).port for t in tags}) == 3
    today = datetime.now(UTC).date()
    buckets = {topo_runtime.store.keys_of(t).usage_base for t in tags}
    assert len(set(scan_usage_keys(client, PREFIX, [today]))) == len(buckets)  # SCAN visits every primary


def test_refusals_are_written_to_every_node(topology, topo_runtime):
    """The tick's refusal records (one LPUSH, LTRIM, EXPIRE per client) reach clients on every primary."""
    windows = rule("fixed_window", "1/min").windows
    tags = [f"{{s.{i}}}" for i in range(30)]
    for tag in tags:
        for decision in (topo_runtime.guard.decide(tag, windows, now=T0 + i) for i in range(2)):
            if not decision.allowed:
                topo_runtime.refusals.note(tag, decision, "free", "", "rate")
    topo_runtime.tick()
    assert len(topo_runtime.refusals) == 0
    client = client_of(topo_runtime)
    stored = [read_refusals(RefusalLists(client, PREFIX), t) for t in tags]
    assert [len(r) for r in stored] == [1] * len(tags)
    assert {r[0]["windows"][0]["remaining"] for r in stored} == {0}
    if topology.name == "cluster":
        assert len({client.get_node_from_key(refusals_key(PREFIX, t)).port for t in tags}) == 3


@pytest.mark.django_db
def test_usage_flush_reads_every_node(topology, topo_runtime):
    """usage.flush.flush_usage copies the counters of clients on every node, through the back-office client the
    runtime builds from QUOTAS['REDIS_URL'] whatever its topology."""
    tags = [f"s.{i}" for i in range(30)]
    for tag in tags:
        assert topo_runtime.guard.decide("{" + tag + "}", rule("fixed_window", "5/min").windows, usage="-|-").allowed
    report = flush_usage()
    assert report.keys == 30
    assert sorted(UsageRecord.objects.values_list("client", flat=True)) == sorted(tags)


def test_the_history_is_written_and_read_on_every_topology(topology, topo_runtime):
    """The engine's history: one non-transactional pipeline over minute, hour and top keys (in several
    slots on a cluster), read back with the totals written."""
    now = time.time()
    for i in range(30):
        topo_runtime.history.note("free", "", "allowed", "none", f"{{s.{i}}}", at=now)
    topo_runtime.history.note("free", "", "denied", "rate", "{s.1}", at=now)
    topo_runtime.tick()
    assert topo_runtime.history.pending() == 0
    at = datetime.fromtimestamp(now, UTC)
    for resolution in ("minute", "hour"):
        (bucket,) = read_history(client_of(topo_runtime), PREFIX, resolution, at, at)
        assert (bucket.plan, bucket.total, bucket.denied) == ("free", 31, 1)
    assert read_top_clients(client_of(topo_runtime), PREFIX, at, at, by="denied", limit=5) == [("s.1", 1)]
    assert len(read_top_clients(client_of(topo_runtime), PREFIX, at, at, by="allowed", limit=100)) == 30


# Cluster down -------------------------------------------------------------------------------------------------------


def test_a_cluster_that_is_entirely_down_is_store_unavailable(tmp_path, runtime_on):
    """With every node gone, a decision raises StoreUnavailable (so the failure mode applies), not a raw error."""
    small = Cluster(tmp_path, size=1).start()
    try:
        runtime = runtime_on(small.url)
        windows = rule("token_bucket", "5/min").windows
        assert runtime.guard.decide("{c}", windows).allowed
    finally:
        small.stop()
    with pytest.raises(StoreUnavailable):
        runtime.guard.decide("{c}", windows)
