"""The bucketed key layout: clients share hashes, and dead clients' fields are swept."""

from __future__ import annotations

import pytest

from quotas.engine import default_engine
from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
from tests.store_client import client_of

T0 = 1_700_000_040.0
SWEEP_ODDS = 64  # bucket.lua


@pytest.fixture
def one_bucket(runtime, settings):
    """An engine whose clients all share a single bucket (on the store ``runtime`` runs on)."""
    settings.QUOTAS = {**settings.QUOTAS, "KEY_BUCKETS": 1}
    default_engine.reset()
    yield default_engine.runtime()
    default_engine.reset()


@pytest.fixture
def redis_client(one_bucket):
    """The client of that engine's store (the one the settings change replaced is closed)."""
    return client_of(one_bucket)


def window(rates: str, algorithm: str = "token_bucket", limit_id: str = "l1"):
    return LimitRule(id=limit_id, name=limit_id, rates=parse_rates(rates), algorithm=algorithm).windows


def sweeping(t: float) -> float:
    """The first time at or after ``t`` (whole microseconds) at which a write sweeps its bucket."""
    us = int(t * 1_000_000)
    return (us + (-us) % SWEEP_ODDS) / 1_000_000


def not_sweeping(t: float) -> float:
    return sweeping(t) + 1e-6


def test_clients_share_one_hash_and_keep_separate_limits(one_bucket, redis_client):
    windows = window("2/min", "fixed_window")
    for tag in ("{a}", "{b}"):
        decisions = [one_bucket.guard.decide(tag, windows, now=not_sweeping(T0)) for _ in range(3)]
        assert [d.allowed for d in decisions] == [True, True, False]
    (bucket,) = list(redis_client.scan_iter(match="*"))
    assert {f.decode() for f in redis_client.hkeys(bucket)} == {"a|l1:fw60", "a|~", "b|l1:fw60", "b|~", "~"}


def test_a_sweep_removes_dead_clients_and_keeps_live_ones(one_bucket, redis_client):
    short, day = window("5/s"), window("5/day", "fixed_window", "d")
    for i in range(100):
        assert one_bucket.guard.decide(f"{{gone{i}}}", short, now=not_sweeping(T0)).allowed
    assert one_bucket.guard.decide("{stays}", day, now=not_sweeping(T0)).allowed
    (bucket,) = list(redis_client.scan_iter(match="*"))
    assert redis_client.hlen(bucket) == 2 * 101 + 1
    # Three minutes later the 1-second windows (and their headroom) are long dead; the day window is not.
    later = T0 + 180
    assert one_bucket.guard.decide("{new}", short, now=not_sweeping(later)).allowed
    assert redis_client.hlen(bucket) == 2 * 102 + 1  # no sweep yet: it is occasional
    assert one_bucket.guard.decide("{new}", short, now=sweeping(later + 1)).allowed
    fields = {f.decode() for f in redis_client.hkeys(bucket)}
    assert fields == {"stays|d:fw86400", "stays|~", "new|l1:tb1", "new|~", "~"}
    # The survivors' state is intact: the day window still counts its request.
    assert one_bucket.guard.decide("{stays}", day, weight=0, now=later, peek=True).states[0].remaining == 4


def test_the_bucket_lives_as_long_as_its_longest_lived_client(one_bucket, redis_client):
    # At T0 (22:14 UTC) the day window has 1 h 46 min left: the real clock could be minutes before midnight.
    one_bucket.guard.decide("{long}", window("5/day", "fixed_window"), now=T0)
    one_bucket.guard.decide("{short}", window("5/s"), now=T0)
    (bucket,) = list(redis_client.scan_iter(match="*"))
    assert redis_client.pttl(bucket) > 3_600_000
    assert int(redis_client.hget(bucket, "~")) > int(redis_client.hget(bucket, "long|~"))


def test_lifting_a_ban_touches_only_that_client(one_bucket, redis_client):
    policy = "1 60000000 600000000"  # one refusal over the limit bans for 10 minutes
    windows = window("1/min", "fixed_window")
    t = not_sweeping(T0)
    for tag in ("{x}", "{y}"):
        decisions = [one_bucket.guard.decide(tag, windows, ban_policy=policy, now=t) for _ in range(3)]
        assert decisions[-1].ban_started
    assert one_bucket.lift_ban("{x}")
    assert one_bucket.guard.decide("{y}", windows, ban_policy=policy, now=t).banned
    assert not one_bucket.guard.decide("{x}", windows, ban_policy=policy, now=t).banned


def test_a_bucket_over_the_sweep_size_is_swept_less_often_but_still_swept(one_bucket, redis_client):
    """Past SWEEP_FIELDS (256) fields a sweep runs on one eligible write in ceil(fields / 256)."""
    short = window("5/s")
    for i in range(300):
        assert one_bucket.guard.decide(f"{{old{i}}}", short, now=not_sweeping(T0)).allowed
    (bucket,) = list(redis_client.scan_iter(match="*"))
    assert redis_client.hlen(bucket) == 601  # 2 fields a client, and the bucket's expiry
    later_us = int((T0 + 600) * 1_000_000)
    # 601 fields -> every 3rd sweep-eligible time: find one that skips and one that sweeps.
    skip = next(t for t in range(later_us, later_us + 64 * 10, 64) if (t // 64) % 3 != 0)
    sweep = next(t for t in range(later_us, later_us + 64 * 10, 64) if (t // 64) % 3 == 0)
    one_bucket.guard.decide("{a}", short, now=skip / 1_000_000)
    assert redis_client.hlen(bucket) == 603
    one_bucket.guard.decide("{b}", short, now=sweep / 1_000_000)
    assert {f.decode() for f in redis_client.hkeys(bucket)} == {"a|l1:tb1", "a|~", "b|l1:tb1", "b|~", "~"}


def test_clients_sharing_a_usage_hash_keep_separate_rows(one_bucket, redis_client):
    """Usage of one bucket's clients lands in one hash a day; readers tell the clients apart."""
    from datetime import UTC, datetime

    from quotas.store.usage_hash_format import add_hash, read_snapshot, scan_usage_keys, usage_key

    windows = window("1/min", "fixed_window")
    assert one_bucket.guard.decide("{s.1}", windows, usage="7|search").allowed
    assert not one_bucket.guard.decide("{s.1}", windows, usage="7|search").allowed
    assert one_bucket.guard.decide("{s.2}", windows, weight=1, usage="7|-").allowed
    today = datetime.now(UTC).date()
    (key,) = scan_usage_keys(redis_client, one_bucket.prefix, [today])
    assert key == usage_key(one_bucket.prefix, "s.2", today)
    rows = read_snapshot(redis_client, one_bucket.prefix, [key]).rows
    by_client = {
        (k.client, k.plan_key, k.scope): (v["allowed"], v["denied_rate"], v["weight"]) for k, v in rows.items()
    }
    assert by_client == {("s.1", 7, "search"): (1, 1, 1), ("s.2", 7, ""): (1, 0, 1)}
    # A report for one client reads the shared hash and keeps only that client's fields.
    mine: dict = {}
    add_hash(mine, today, redis_client.hgetall(key), client="s.2")
    assert [k.client for k in mine] == ["s.2"]
