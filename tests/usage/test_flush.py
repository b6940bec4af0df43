"""flush_usage: the Redis usage counters of real throttled requests, copied into UsageRecord rows."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from plans.models import APIKey
from quotas.engine import default_engine
from quotas.identity.clients import hash_api_key
from quotas.settings import quota_settings
from quotas.store.usage_hash_format import read_snapshot, readable_days, scan_usage_keys, server_now
from tests.factories import issue_key
from usage.flush import flush_usage, write_rows
from usage.models import UsageRecord

from .conftest import assert_refusals_counted, send

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def tag_of(raw_key: str) -> str:
    return f"s.{APIKey.objects.get(key_hash=hash_api_key(raw_key)).subscription_id}"


def rows(client: str) -> dict[str, dict[str, int]]:
    """The client's rows by scope: every counter."""
    fields = ("allowed", "denied_rate", "denied_budget", "shadow_would_deny", "weight", "cost_micros")
    return {r.scope: {f: getattr(r, f) for f in fields} for r in UsageRecord.objects.filter(client=client)}


def counts(allowed=0, denied_rate=0, weight=None, cost_micros=0, denied_budget=0, shadow_would_deny=0):
    return {
        "allowed": allowed, "denied_rate": denied_rate, "denied_budget": denied_budget,
        "shadow_would_deny": shadow_would_deny, "weight": allowed if weight is None else weight,
        "cost_micros": cost_micros,
    }  # fmt: skip


def test_flush_copies_every_decision_of_real_requests(api, free, redis_client):
    """One row per client, plan, scope and day, with what the throttle decided; FKs filled in."""
    key = issue_key(plan=free)
    client = tag_of(key)
    assert send(api, key, 3, "/api/demo/search?q=x") == {200: 2, 429: 1}  # the search limit: 2/min
    assert send(api, key, 4) == {200: 3, 429: 1}  # global: 5/min, 2 spent by the searches
    assert send(api, None, 2) == {200: 2}  # anonymous: the default plan, by IP

    report = flush_usage()

    assert (report.keys, report.rows, report.written, report.skipped) == (2, 3, 3, 0)
    assert rows(client) == {"search": counts(2, 1), "": counts(3, 1)}
    assert rows("ip.*") == {"": counts(2)}  # anonymous clients are stored as one aggregate
    record = UsageRecord.objects.get(client=client, scope="")
    assert record.subscription.api_keys.get().key_hash == hash_api_key(key)
    assert (record.plan, record.plan_key) == (free, free.pk)
    assert record.day == server_now(redis_client).date()
    assert UsageRecord.objects.get(client="ip.*").subscription is None


def test_flushing_twice_gives_the_same_totals(api, free, redis_client):
    """The second flush finds nothing to move forward and changes no total."""
    key = issue_key(plan=free)
    send(api, key, 6)
    flush_usage()
    first = rows(tag_of(key))

    again = flush_usage()

    assert (again.rows, again.written) == (1, 0)
    assert rows(tag_of(key)) == first == {"": counts(5, 1)}


def test_every_refusal_is_counted_even_when_remembered_in_process(api, free, redis_client):
    """A flood past the limit: every refused request is in the usage, not only the first."""
    key = issue_key(plan=free)
    assert send(api, key, 8) == {200: 5, 429: 3}
    flush_usage()
    (row,) = UsageRecord.objects.filter(client=tag_of(key))
    assert (row.allowed, row.weight) == (5, 5)
    assert_refusals_counted({row.client: row.denied}, {tag_of(key): 3})


@pytest.mark.redis
def test_values_are_absolute_so_more_traffic_is_not_added_twice(api, pro, redis_client):
    """Redis holds cumulative totals: a later flush replaces a row's counts, it never adds to them."""
    key = issue_key(plan=pro)
    send(api, key, 4)
    flush_usage()
    send(api, key, 6)

    flush_usage()
    flush_usage()

    assert rows(tag_of(key)) == {"": counts(10)}


@pytest.mark.redis
def test_redis_is_only_read(api, free, redis_client):
    """A flush deletes nothing and leaves every hash and its expiry as it was."""
    send(api, issue_key(plan=free), 3)
    before = {k: (redis_client.hgetall(k), redis_client.pexpiretime(k)) for k in redis_client.scan_iter("*:u:*")}

    flush_usage()

    after = {k: (redis_client.hgetall(k), redis_client.pexpiretime(k)) for k in redis_client.scan_iter("*:u:*")}
    assert after == before
    assert len(before) == 1
    (expires_ms,) = [e for _, e in before.values()]
    day_end = server_now(redis_client).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    # Three days after the day ends where it ends last (UTC-12): usage days begin in BUDGET_TIME_ZONE.
    assert expires_ms == (day_end + timedelta(days=3, hours=12)).timestamp() * 1000


def test_an_older_snapshot_never_replaces_a_newer_row(api, pro, redis_client):
    """Concurrent flushes: a batch read earlier but committed later cannot put older totals back."""
    key = issue_key(plan=pro)
    send(api, key, 2)
    prefix = quota_settings.KEY_PREFIX
    days = readable_days(server_now(redis_client).date())
    early = read_snapshot(redis_client, prefix, list(scan_usage_keys(redis_client, prefix, days)))
    send(api, key, 3)
    flush_usage()

    assert write_rows(early.rows, early.observed_at) == 0

    assert rows(tag_of(key)) == {"": counts(5)}


@pytest.mark.redis
def test_redis_losing_its_data_adds_a_generation_instead_of_lowering_usage(api, pro, redis_client):
    """10 requests flushed, FLUSHALL, 4 more flushed: the database holds 14, with the cost of all 14.

    The emptied Redis starts the day's hash again under a new generation id,
    so the flush copies it to a row of its own instead of mistaking its 4 for
    the day's total; the usage API sums both.
    """
    key = issue_key(plan=pro)
    assert send(api, key, 10, "/t/priced?est=0.01") == {200: 10}
    flush_usage()
    redis_client.flushall()
    default_engine.reset()
    assert send(api, key, 4, "/t/priced?est=0.01") == {200: 4}

    flush_usage()
    flush_usage()  # flushing again changes nothing

    records = UsageRecord.objects.filter(client=tag_of(key))
    assert records.count() == 2
    assert len({r.generation for r in records}) == 2
    assert sum(r.allowed for r in records) == 14
    assert sum(r.cost_micros for r in records) == 14 * 10_000
    body = api.get("/api/v1/usage/", HTTP_X_API_KEY=key).json()
    assert body["totals"]["allowed"] == 14
    assert Decimal(body["totals"]["cost"]) == Decimal("0.14")


@pytest.mark.redis
def test_a_cost_lowered_after_a_flush_is_copied_lower(api, free, redis_client, monkeypatch):
    """Cost is reconciled after the view: a flush that saw the estimate is corrected by the next.

    The view itself runs a flush between the decision (estimate 0.5 charged)
    and the reconciliation (a failed view is charged nothing).
    """
    from tests.urls import PricedView

    view_get = PricedView.get

    def get_with_flush(self, request):
        flush_usage()
        return view_get(self, request)

    key = issue_key(plan=free)
    assert send(api, key, 1, "/t/priced?est=0.25&actual=0.1") == {200: 1}
    monkeypatch.setattr(PricedView, "get", get_with_flush)
    assert send(api, key, 1, "/t/priced?est=0.5&fail=1") == {500: 1}
    assert rows(tag_of(key))["priced"]["cost_micros"] == 600_000  # 0.1 + the in-flight estimate

    flush_usage()

    assert rows(tag_of(key)) == {"priced": counts(2, cost_micros=100_000)}


def test_the_days_redis_still_holds_are_flushed(api, pro, redis_client):
    """Today and the three days before it (the hashes' lifetime) are read; older days are not."""
    send(api, issue_key(plan=pro), 1)
    now = server_now(redis_client)

    assert flush_usage(now=now + timedelta(days=3)).keys == 1
    assert flush_usage(now=now + timedelta(days=4)).keys == 0
    assert flush_usage(now=now - timedelta(days=1)).keys == 0


def test_the_flush_copies_the_memory_stores_counts(api, free, set_quotas):
    """With REDIS_URL = "memory://" (a project's tests), the usage flush run in the same process reads the
    counts the requests wrote there and copies them to the database, as from Redis."""
    from quotas.engine import default_engine
    from quotas.store.backends.memory import forget

    forget("memory://flush")
    set_quotas(REDIS_URL="memory://flush")
    assert send(api, issue_key(plan=free), 6) == {200: 5, 429: 1}
    # what the engine counted in-process (a refusal from memory), too
    default_engine.runtime().guard.usage.flush_usage()
    report = flush_usage()
    assert report.rows == 1
    (row,) = UsageRecord.objects.values_list("allowed", "denied_rate")
    assert row == (5, 1)
    forget("memory://flush")
