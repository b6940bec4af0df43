"""The engine's usage history (quotas/observability/history.py): notes in process, one pipeline a tick, TTLs."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from quotas.exceptions import StoreUnavailable
from quotas.observability.history import HOUR_KEEP, MINUTE_KEEP, TOP_KEEP, History
from quotas.store.history_store import HistoryStore, bucket_key, read_history, read_top_clients, top_key
from tests.unreachable import unreachable_redis

PREFIX = "quota:v1"
#: 15 min 30 s into the last hour: inside a minute and an hour, far from both edges, and recent enough that
#: Redis has not expired its minute (the keys expire at absolute times, so a fixed date would be gone).
AT = (time.time() // 3600 - 1) * 3600 + 930


def noted(history: History, n: int, outcome: str, reason: str, client: str = "{s.1}", plan: str | None = "free",
          scope: str = "", at: float = AT) -> None:  # fmt: skip
    for _ in range(n):
        history.note(plan, scope, outcome, reason, client, at=at)


def test_a_write_counts_each_outcome_per_minute_and_hour(redis_client):
    """Allowed, shadow and each refusal reason land in the minute's and the hour's hash; a shadow-denied
    request counts as allowed too; denied, total and the denial rate follow."""
    history = History()
    noted(history, 5, "allowed", "none")
    noted(history, 1, "shadow_denied", "none")
    noted(history, 2, "denied", "rate")
    noted(history, 1, "denied", "local")
    noted(history, 3, "denied", "acl", plan=None, scope="search")
    history.write(HistoryStore(redis_client, PREFIX))
    assert history.pending() == 0
    at = datetime.fromtimestamp(AT, UTC)
    for resolution in ("minute", "hour"):
        unplanned, free = read_history(redis_client, PREFIX, resolution, at, at)
        assert (free.plan, free.scope, unplanned.plan, unplanned.scope) == ("free", None, None, "search")
        assert free.counters["allowed"] == 6
        assert free.counters["shadow_would_deny"] == 1
        assert (free.counters["denied_rate"], free.counters["denied_local"]) == (2, 1)
        assert (free.denied, free.total, free.denial_rate) == (3, 9, 3 / 9)
        assert (unplanned.counters["denied_acl"], unplanned.denial_rate) == (3, 1.0)
    assert redis_client.hgetall(bucket_key(PREFIX, "minute", AT)) == {
        b"free|-|a": b"6",
        b"free|-|sw": b"1",
        b"free|-|dr": b"2",
        b"free|-|dl": b"1",
        b"-|search|da": b"3",
    }


@pytest.mark.redis
def test_keys_expire_two_hours_and_seven_days_after_their_bucket(redis_client):
    """The minute hash lives 2 h after its minute ends, the hour hash and top sets 7 days after their hour
    (plus the documented margins)."""
    history = History()
    noted(history, 1, "allowed", "none")
    noted(history, 1, "denied", "rate")
    history.write(HistoryStore(redis_client, PREFIX))
    minute_end = (AT // 60 + 1) * 60
    hour_end = (AT // 3600 + 1) * 3600
    assert redis_client.expiretime(bucket_key(PREFIX, "minute", AT)) == minute_end + MINUTE_KEEP
    for key in (bucket_key(PREFIX, "hour", AT), top_key(PREFIX, AT, "a"), top_key(PREFIX, AT, "d")):
        assert redis_client.expiretime(key) == hour_end + HOUR_KEEP
    assert 2 * 3600 < MINUTE_KEEP <= 2 * 3600 + 600
    assert 7 * 86400 < HOUR_KEEP <= 7 * 86400 + 3600


def test_top_clients_are_summed_over_hours_and_trimmed_to_the_top_100(redis_client):
    """Each hour keeps its 100 busiest clients per side; the read sums the hours and ranks them."""
    history = History()
    for i in range(TOP_KEEP + 20):
        noted(history, i + 1, "allowed", "none", client=f"{{s.{i}}}")
    noted(history, 4, "denied", "budget", client="{s.7}")
    noted(history, 3, "denied", "rate", client="{s.7}", at=AT + 3600)  # the next hour
    history.write(HistoryStore(redis_client, PREFIX))
    assert redis_client.zcard(top_key(PREFIX, AT, "a")) == TOP_KEEP
    start, end = datetime.fromtimestamp(AT, UTC), datetime.fromtimestamp(AT + 3600, UTC)
    top = read_top_clients(redis_client, PREFIX, start, end, by="allowed", limit=3)
    assert top == [("s.119", 120), ("s.118", 119), ("s.117", 118)]
    assert read_top_clients(redis_client, PREFIX, start, end, by="denied", limit=10) == [("s.7", 7)]
    assert read_top_clients(redis_client, PREFIX, start, start, by="denied", limit=10) == [("s.7", 4)]


def test_a_failed_write_keeps_the_counts_for_the_next(redis_client):
    """Redis unreachable: the write raises and nothing is lost; the next write counts everything once."""
    history = History()
    noted(history, 3, "allowed", "none")
    closed = unreachable_redis()
    with pytest.raises(StoreUnavailable):
        history.write(HistoryStore(closed, PREFIX))
    noted(history, 2, "denied", "rate")  # counted meanwhile
    assert history.pending() == 5
    history.write(HistoryStore(redis_client, PREFIX))
    (bucket,) = read_history(redis_client, PREFIX, "hour", *[datetime.fromtimestamp(AT, UTC)] * 2)
    assert (bucket.counters["allowed"], bucket.counters["denied_rate"]) == (3, 2)
    at = datetime.fromtimestamp(AT, UTC)
    assert read_top_clients(redis_client, PREFIX, at, at, by="allowed", limit=5) == [("s.1", 3)]


def test_the_engine_tick_writes_the_history_and_counts_its_failures(redis_server, runtime, redis_client):
    """Runtime.tick writes the notes; with Redis down it counts a "history" Redis error and keeps them."""
    errors = {"operation": "history"}
    before = REGISTRY.get_sample_value("quota_redis_errors_total", errors)
    assert before is not None  # present at 0 from the first scrape
    noted(runtime.history, 2, "allowed", "none")
    redis_server.stop()
    try:
        runtime.tick()
    finally:
        redis_server.start()
    assert REGISTRY.get_sample_value("quota_redis_errors_total", errors) == before + 1
    assert runtime.history.pending() == 2
    runtime.tick()
    assert runtime.history.pending() == 0
    at = datetime.fromtimestamp(AT, UTC)
    assert read_history(redis_client, runtime.prefix, "minute", at - timedelta(seconds=1), at)[0].total == 2
