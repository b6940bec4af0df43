"""A real Celery worker killed with SIGKILL in the middle of a flush loses and double-counts nothing.

Runs against the session's database: PostgreSQL when DATABASE_URL is set (CI),
else SQLite through a file copy of the test database.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from typing import Any

import pytest
from celery import Celery
from django.db import connections
from rest_framework.test import APIClient

from plans.models import APIKey
from quotas.identity.clients import hash_api_key
from quotas.settings import quota_settings
from quotas.store.usage_hash_format import read_snapshot, readable_days, scan_usage_keys, server_now
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from usage.models import DENIALS

from .conftest import assert_refusals_counted
from .processes import CeleryWorker, WorkerDatabase, flush_script, process_env, send_requests

SENDERS = 4
#: Rounds each sender sends at least (4 clients x 2 paths each), before and after its stop is set.
LEAST = 20
#: Flushes run to their end while the senders are still sending, after the kills.
FLUSHES_WHILE_SENDING = 2
PATHS = ["/api/demo/ping", "/api/demo/search?q=x"]
BATCH_DELAY = "0.3"  # seconds slept inside each flush transaction: the kill lands mid-flush


def tag_of(raw_key: str) -> str:
    return f"s.{APIKey.objects.get(key_hash=hash_api_key(raw_key)).subscription_id}"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_worker_killed_mid_flush_loses_and_double_counts_nothing(redis_server, redis_client, tmp_path):
    """4 processes send requests while a real worker flushes; it is SIGKILLed twice mid-flush, then flushes
    FLUSHES_WHILE_SENDING times to the end, the requests still coming; then the senders stop.

    After a final flush, every client's database totals equal exactly what
    its requests got: allowed = its 200s, denied = its 429s. After each kill,
    no flushed total exceeds what Redis holds.
    """
    keys = subscribed_clients()

    # Warm this process up (rules and keys cached: the forked senders need no database); count it.
    sent: Counter = Counter()
    api = APIClient(raise_request_exception=False)
    for client, key in keys.items():
        sent[client, api.get(PATHS[0], HTTP_X_API_KEY=key).status_code] += 1

    database = WorkerDatabase(tmp_path)
    database.publish()
    connections.close_all()
    env = process_env(redis_server.url, database, USAGE_FLUSH_BATCH_SIZE="1", USAGE_FLUSH_BATCH_DELAY=BATCH_DELAY)
    producer = Celery("usage-test", broker=env["CELERY_BROKER_URL"], set_as_current=False)
    log = tmp_path / "worker.log"
    ctx = multiprocessing.get_context("fork")
    barrier, stop, results = ctx.Barrier(SENDERS + 1), ctx.Event(), ctx.Queue()
    senders = [ctx.Process(target=send_requests, args=(keys, PATHS, LEAST, stop, barrier, results))
               for _ in range(SENDERS)]  # fmt: skip
    worker = CeleryWorker(env, log)
    kills = 0
    try:
        for p in senders:
            p.start()
        worker.start()
        barrier.wait(timeout=30)
        # Twice: a flush starts, commits a batch or two, and the worker dies inside the next transaction.
        for _ in range(2):
            worker = kill_mid_flush(worker, producer, database, redis_client)
            kills += 1
        # Flush again, to the end, while the senders are still at it (they send until told to stop).
        for flushes in range(1, FLUSHES_WHILE_SENDING + 1):
            producer.send_task("usage.flush")
            worker.wait_for(lambda text, n=flushes: text.count("usage flush finished") >= n, 30, "a flush")
        assert all(p.is_alive() for p in senders), "a sender ended before it was told to"
        stop.set()
        rounds = collect(senders, results, sent, len(keys) * len(PATHS))
        producer.send_task("usage.flush")  # the one after the last request
        worker.wait_for(lambda text: text.count("usage flush finished") > flushes, 60, "the final flush")
    finally:
        worker.stop()
        for p in senders:
            if p.is_alive():
                p.kill()
        producer.close()
    assert kills == 2
    assert sum(sent.values()) == rounds * len(keys) * len(PATHS) + len(keys)
    assert set(status for _, status in sent) <= {200, 429}
    assert_totals_are_what_clients_got(database.totals(), keys, sent)


def collect(senders: list, results: Any, sent: Counter, per_round: int) -> int:
    """Wait for ``senders`` to end and add what each got to ``sent``; returns the rounds they sent in all. Each
    sender's round got ``per_round`` answers (every key on every path)."""
    for p in senders:
        p.join(timeout=120)
        assert p.exitcode == 0
    rounds = 0
    for _ in senders:
        own_rounds, got = results.get(timeout=10)
        assert own_rounds >= LEAST
        assert sum(got.values()) == own_rounds * per_round
        rounds += own_rounds
        sent.update(got)
    return rounds


def subscribed_clients() -> dict[str, str]:
    """Three free subscribers and one pro: their API keys by client tag."""
    free = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=free, name="global", rates="300/min", algorithm="fixed_window")
    EndpointLimitFactory(plan=free, name="search", scope="search", rates="100/min", algorithm="sliding_window_log")
    pro = PlanFactory(slug="pro", monthly_price=49, priority=5)
    EndpointLimitFactory(plan=pro, name="global", rates="5000/min", algorithm="token_bucket")
    raw = [issue_key(plan=free) for _ in range(3)] + [issue_key(plan=pro)]
    return {tag_of(k): k for k in raw}


def kill_mid_flush(worker: CeleryWorker, producer: Celery, database: WorkerDatabase, redis_client) -> CeleryWorker:
    """A flush starts, commits a batch or two, and ``worker`` dies inside the next transaction: no flushed
    total may then exceed what Redis holds. Returns the worker started in its place."""
    producer.send_task("usage.flush")
    worker.wait_for(lambda text: "usage flush: batch 2 written" in text, 30, "a flush to be half done")
    assert worker.count("usage flush finished") == 0, "the flush finished before it could be killed"
    worker.kill()
    assert_not_over(database.totals(), redis_totals(redis_client))
    return CeleryWorker(worker.env, worker.log_path).start()


def assert_totals_are_what_clients_got(totals: dict[str, Counter], keys: dict[str, str], sent: Counter) -> None:
    """Each client's flushed totals: allowed (and weight) = its 200s, refusals = its 429s."""
    assert set(totals) == set(keys)
    for client in keys:
        assert totals[client]["allowed"] == sent[client, 200], client
        assert totals[client]["weight"] == sent[client, 200], client
    assert_refusals_counted(
        {client: sum(totals[client][d] for d in DENIALS) for client in keys}, {c: sent[c, 429] for c in keys}
    )


def redis_totals(redis_client) -> dict[str, Counter]:
    """Every client's live totals in Redis, summed over its rows."""
    prefix = quota_settings.KEY_PREFIX
    keys = list(scan_usage_keys(redis_client, prefix, readable_days(server_now(redis_client).date())))
    totals: dict[str, Counter] = {}
    for key, counters in read_snapshot(redis_client, prefix, keys).rows.items():
        totals.setdefault(key.client, Counter()).update(counters)
    return totals


def assert_not_over(flushed: dict[str, Counter], live: dict[str, Counter]) -> None:
    """A flush, even a killed one, never writes more than Redis holds (read after it)."""
    for client, got in flushed.items():
        for counter in ("allowed", "denied_rate", "weight"):
            assert got[counter] <= live[client][counter], (client, counter, got, live[client])


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_concurrent_flushes_agree(redis_server, redis_client, tmp_path):
    """Three processes flush over and over, at the same time, while 4 processes send requests until they end.

    No flush fails (no deadlock, no duplicate row, no lock timeout), and one
    last flush leaves exactly what the requests got.
    """
    free = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=free, name="global", rates="300/min", algorithm="fixed_window")
    EndpointLimitFactory(plan=free, name="search", scope="search", rates="100/min", algorithm="sliding_window_log")
    keys = {tag_of(k): k for k in [issue_key(plan=free) for _ in range(4)]}
    sent: Counter = Counter()
    api = APIClient(raise_request_exception=False)
    for client, key in keys.items():
        sent[client, api.get(PATHS[0], HTTP_X_API_KEY=key).status_code] += 1
    database = WorkerDatabase(tmp_path)
    database.publish()
    connections.close_all()
    env = process_env(redis_server.url, database)
    ctx = multiprocessing.get_context("fork")
    barrier, stop, results = ctx.Barrier(SENDERS + 1), ctx.Event(), ctx.Queue()
    senders = [ctx.Process(target=send_requests, args=(keys, PATHS, LEAST, stop, barrier, results))
               for _ in range(SENDERS)]  # fmt: skip
    flushers = []
    try:
        for p in senders:
            p.start()
        barrier.wait(timeout=30)
        flushers = [flush_script(env, rounds=10) for _ in range(3)]
        for f in flushers:
            _, err = f.communicate(timeout=120)
            assert f.returncode == 0, err.decode()
        assert all(p.is_alive() for p in senders), "a sender ended before the flushers"
        stop.set()
        collect(senders, results, sent, len(keys) * len(PATHS))
        last = flush_script(env, rounds=1)
        _, err = last.communicate(timeout=60)
        assert last.returncode == 0, err.decode()
    finally:
        for p in [*senders, *flushers]:
            p.kill()
    totals = database.totals()
    for client in keys:
        assert totals[client]["allowed"] == sent[client, 200], client
    assert_refusals_counted(
        {client: sum(totals[client][d] for d in DENIALS) for client in keys}, {c: sent[c, 429] for c in keys}
    )
