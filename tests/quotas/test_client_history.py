"""Subscribers' own recent history (quotas/observability/history.py): per client and minute, written by the
engine's tick, read per minute or per hour, kept 25 hours; addresses get none."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from quotas.exceptions import StoreUnavailable
from quotas.observability.history import CLIENT_KEEP, History
from quotas.store.history_store import HistoryStore, client_key, read_client_history
from tests.unreachable import unreachable_redis

PREFIX = "quota:v1"
#: 15 min 30 s into the last hour (recent enough that its hash has not expired: EXPIREAT is absolute).
AT = (time.time() // 3600 - 1) * 3600 + 930


def noted(history: History, n: int, outcome: str, reason: str, client: str = "{s.7}", at: float = AT) -> None:
    for _ in range(n):
        history.note("free", "", outcome, reason, client, at=at)


def test_a_subscriber_gets_a_hash_per_hour_with_allowed_and_denied_per_minute(redis_client):
    """Admitted (shadow-denied included) and refused requests land in ``<MM>|a`` / ``<MM>|d`` of the client's
    hour hash; an address or a user gets no hash of its own."""
    history = History()
    noted(history, 4, "allowed", "none")
    noted(history, 1, "shadow_denied", "none")
    noted(history, 2, "denied", "rate")
    noted(history, 1, "denied", "budget", at=AT + 60)
    noted(history, 3, "allowed", "none", client="{ip.10.0.0.1}")
    noted(history, 3, "allowed", "none", client="{u.5}")
    history.write(HistoryStore(redis_client, PREFIX))
    assert redis_client.hgetall(client_key(PREFIX, "{s.7}", AT)) == {b"15|a": b"5", b"15|d": b"2", b"16|d": b"1"}
    assert redis_client.keys(f"{PREFIX}:hist:c:*") == [client_key(PREFIX, "s.7", AT).encode()]


def test_read_per_minute_and_per_hour_with_zeros(redis_client):
    """Minutes come back one by one, zeros included; hours sum their minutes."""
    history = History()
    noted(history, 4, "allowed", "none")
    noted(history, 2, "denied", "rate", at=AT + 60)
    noted(history, 3, "allowed", "none", at=AT - 3600)
    history.write(HistoryStore(redis_client, PREFIX))
    at = datetime.fromtimestamp(AT, UTC)
    start, end = at - timedelta(minutes=2), at + timedelta(minutes=1)
    minutes = read_client_history(redis_client, PREFIX, "{s.7}", "minute", start=start, end=end)
    assert [(p.allowed, p.denied) for p in minutes] == [(0, 0), (0, 0), (4, 0), (0, 2)]
    assert minutes[2].start == datetime.fromtimestamp(AT // 60 * 60, UTC)
    hours = read_client_history(redis_client, PREFIX, "s.7", "hour", start=at - timedelta(hours=2), end=at)
    assert [(p.allowed, p.denied) for p in hours] == [(0, 0), (3, 0), (4, 2)]
    assert read_client_history(redis_client, PREFIX, "{s.8}", "hour", start=at, end=at)[0].allowed == 0


@pytest.mark.redis
def test_a_client_hash_expires_25_hours_after_its_hour(redis_client):
    history = History()
    noted(history, 1, "allowed", "none")
    history.write(HistoryStore(redis_client, PREFIX))
    hour_end = (AT // 3600 + 1) * 3600
    assert redis_client.expiretime(client_key(PREFIX, "s.7", AT)) == hour_end + CLIENT_KEEP == hour_end + 25 * 3600


def test_a_failed_write_keeps_the_client_counts(redis_client):
    history = History()
    noted(history, 3, "allowed", "none")
    closed = unreachable_redis()
    with pytest.raises(StoreUnavailable):
        history.write(HistoryStore(closed, PREFIX))
    noted(history, 1, "denied", "rate")
    history.write(HistoryStore(redis_client, PREFIX))
    assert redis_client.hgetall(client_key(PREFIX, "s.7", AT)) == {b"15|a": b"3", b"15|d": b"1"}


def test_real_requests_are_written_by_the_engine_tick(runtime, redis_client, client, db):
    """Requests by a demo subscriber through the throttle reach its hash once the engine ticks (the poller's
    job: the request path only notes them in the process)."""
    from django.core.management import call_command

    from demo.seed import demo_key
    from tests.dashboard.conftest import send, subscription_of

    call_command("seed_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115 - closed at exit
    codes = send(client, demo_key("free"), 12, "/api/demo/search?q=x")
    sub = subscription_of(demo_key("free"))
    now = datetime.now(UTC)
    runtime.tick()
    (point,) = read_client_history(redis_client, runtime.prefix, f"s.{sub.pk}", "hour", start=now, end=now)
    assert (point.allowed, point.denied) == (codes[200], codes[429]) == (10, 2)


@pytest.mark.redis
def test_a_full_hour_hash_stays_small(redis_client):
    """120 fields (every minute admitted and refused, five-digit counts) take under 1.5 KB: a listpack
    (the figure docs/usage-api.md and the module docstring give, 1,368 bytes on Redis 7.0)."""
    history = History()
    hour = AT // 3600 * 3600
    for minute in range(60):
        history.note("free", "", "allowed", "none", "{s.123456}", at=hour + minute * 60)
        history.note("free", "", "denied", "rate", "{s.123456}", at=hour + minute * 60)
    history.write(HistoryStore(redis_client, PREFIX))
    key = client_key(PREFIX, "s.123456", AT)
    assert redis_client.hlen(key) == 120
    # A busy subscriber's hour: the counts later writes add up to, 98,765 admitted and 4,321 refused a minute.
    for field in redis_client.hkeys(key):
        redis_client.hincrby(key, field, 98765 - 1 if field.endswith(b"|a") else 4321 - 1)
    assert redis_client.object("encoding", key) == b"listpack"
    assert redis_client.memory_usage(key) < 1500
