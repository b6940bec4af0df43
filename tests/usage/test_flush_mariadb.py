"""The usage flush on a real MariaDB: the totals the throttle counted, under the same rules as PostgreSQL and SQLite.

The requests go through the real throttle in this process (its own database, its own Redis); the
flush runs in a project process whose database is a throwaway one on the machine's MariaDB
(``MARIADB_URL``, see tests/usage/mariadb.py). Without the PyMySQL driver or a reachable server
these tests are skipped, or failed when QUOTAS_REQUIRE_SERVICES=1. The upsert's rules are also run step
by step on MariaDB and on the session's own database, which must agree.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from plans.models import APIKey
from quotas.engine import default_engine
from quotas.identity.clients import hash_api_key
from quotas.store.usage_hash_format import RowKey
from tests.conftest import skip_or_fail
from tests.factories import issue_key
from usage.flush import write_rows
from usage.models import COUNTERS, DENIALS

from .conftest import send
from .db_process import rows as usage_rows
from .mariadb import MariaDB, Unavailable
from .processes import flush_script, process_env

pytestmark = pytest.mark.urls("tests.urls")


@pytest.fixture(scope="session")
def mariadb(redis_server) -> Iterator[MariaDB]:
    """A database of this session's (each xdist worker's) own on the MariaDB server, migrated once: the slow
    tests are handed out one at a time, so a module fixture would be made again each time a worker came back to
    this module. Each test starts by emptying it (copy_plans). Dropped at the end."""
    database = MariaDB()
    try:
        database.create()
    except Unavailable as exc:
        skip_or_fail(str(exc))
    try:
        database.run(redis_server.url, "migrate")
        yield database
    finally:
        database.drop()


def copy_plans(tmp_path: Path) -> list[str]:
    """The db_process command that empties the MariaDB database, then copies this test's plans and subscriptions
    there with their ids, so the flush finds them and fills its rows' foreign keys; chained (``+``) before the
    test's first command on MariaDB where it can be, to run in that command's process."""
    fixture = tmp_path / "plans.json"
    call_command("dumpdata", "quota_plans.plan", "quota_plans.subscription", output=str(fixture), verbosity=0)
    return ["reset", str(fixture)]


def tag_of(raw_key: str) -> str:
    return f"s.{APIKey.objects.get(key_hash=hash_api_key(raw_key)).subscription_id}"


def totals(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    """Each row's counts by client and scope: refusals summed over their reasons."""
    return {
        (r["client"], r["scope"]): {
            "allowed": r["allowed"], "denied": sum(r[d] for d in DENIALS), "weight": r["weight"],
            "cost_micros": r["cost_micros"],
        }
        for r in rows
    }  # fmt: skip


def counts(allowed: int, denied: int = 0, cost_micros: int = 0) -> dict[str, int]:
    return {"allowed": allowed, "denied": denied, "weight": allowed, "cost_micros": cost_micros}


@pytest.mark.slow  # a project process per flush
@pytest.mark.django_db
def test_flushes_copy_real_usage_and_move_rows_forward(mariadb, api, free, pro, redis_server, tmp_path):
    """Two subscribers' requests flushed to MariaDB: a row each with what the throttle decided, foreign keys
    filled. After more requests, a second flush moves the existing row up to the new total (the counts are
    cumulative: never added twice) and leaves the other as it was; a third flush writes nothing."""
    small, big = issue_key(plan=free), issue_key(plan=pro)
    assert send(api, small, 7) == {200: 5, 429: 2}  # free: 5 a minute
    assert send(api, big, 3) == {200: 3}
    first = mariadb.run(redis_server.url, *copy_plans(tmp_path), "+", "flush")

    assert (first["report"]["rows"], first["report"]["written"], first["report"]["skipped"]) == (2, 2, 0)
    assert totals(first["rows"]) == {(tag_of(small), ""): counts(5, 2), (tag_of(big), ""): counts(3)}
    keys = {r["client"]: (r["subscription_id"], r["plan_id"], r["plan_key"]) for r in first["rows"]}
    assert keys == {
        tag_of(small): (APIKey.objects.get(key_hash=hash_api_key(small)).subscription_id, free.pk, free.pk),
        tag_of(big): (APIKey.objects.get(key_hash=hash_api_key(big)).subscription_id, pro.pk, pro.pk),
    }

    assert send(api, big, 4) == {200: 4}
    second = mariadb.run(redis_server.url, "flush")

    assert (second["report"]["rows"], second["report"]["written"]) == (2, 1)
    assert totals(second["rows"]) == {(tag_of(small), ""): counts(5, 2), (tag_of(big), ""): counts(7)}
    (unchanged,) = [r for r in second["rows"] if r["client"] == tag_of(small)]
    assert unchanged in first["rows"]  # not rewritten, not even its observed_at

    third = mariadb.run(redis_server.url, "flush")

    assert (third["report"]["rows"], third["report"]["written"]) == (2, 0)
    assert third["rows"] == second["rows"]


@pytest.mark.slow  # a project process per flush
@pytest.mark.django_db
def test_redis_losing_its_data_adds_a_row_on_mariadb(mariadb, api, pro, redis_server, redis_client, tmp_path):
    """10 priced requests flushed, FLUSHALL, 4 more flushed: the new generation's counts go to a row of their
    own beside the first, so MariaDB holds 14 requests and the cost of all 14."""
    key = issue_key(plan=pro)
    assert send(api, key, 10, "/t/priced?est=0.01") == {200: 10}
    before = mariadb.run(redis_server.url, *copy_plans(tmp_path), "+", "flush")
    redis_client.flushall()
    default_engine.reset()
    assert send(api, key, 4, "/t/priced?est=0.01") == {200: 4}

    after = mariadb.run(redis_server.url, "flush")

    assert after["report"]["written"] == 1
    (old,) = before["rows"]
    assert old in after["rows"]
    assert len(after["rows"]) == 2
    assert len({r["generation"] for r in after["rows"]}) == 2
    assert sum(r["allowed"] for r in after["rows"]) == 14
    assert sum(r["cost_micros"] for r in after["rows"]) == 14 * 10_000


@pytest.mark.slow  # a project process per flush
@pytest.mark.django_db
def test_concurrent_flushes_agree_on_mariadb(mariadb, api, pro, redis_server, tmp_path):
    """Three processes flush over and over at once (a transaction per usage hash) while requests go on: no flush
    fails (no deadlock, no duplicate row), and one last flush leaves exactly what every client got."""
    keys = [issue_key(plan=pro) for _ in range(12)]
    sent: Counter = Counter()
    for key in keys:
        sent[tag_of(key)] += send(api, key, 3)[200]
    mariadb.run(redis_server.url, *copy_plans(tmp_path))
    flushers = [flush_script(process_env(redis_server.url, mariadb), rounds=10) for _ in range(3)]
    try:
        for _ in range(40):  # requests all the while the flushers run (a bounded loop)
            if all(flusher.poll() is not None for flusher in flushers):
                break
            for key in keys:
                sent[tag_of(key)] += send(api, key, 1, "/api/demo/search?q=x")[200]
        for flusher in flushers:
            _, err = flusher.communicate(timeout=120)
            assert flusher.returncode == 0, err.decode()[-3000:]
    finally:
        for flusher in flushers:
            flusher.kill()

    last = mariadb.run(redis_server.url, "flush")

    allowed: Counter = Counter()
    for row in last["rows"]:
        allowed[row["client"]] += row["allowed"]
    assert allowed == sent


T = datetime(2026, 11, 24, 12, 0, 0, 123_456, tzinfo=UTC)

#: write_rows, step by step: (seconds after T the snapshot was read, its counts by scope, rows written, the rows
#: after it by scope as (allowed, denied_rate, cost_micros, seconds after T of the snapshot they hold)).
STEPS: list[tuple[int, dict[str, dict[str, int]], int, dict[str, tuple[int, int, int, int]]]] = [
    (0, {"": {"allowed": 5, "cost_micros": 100}}, 1, {"": (5, 0, 100, 0)}),  # a new row
    (0, {"": {"allowed": 5, "cost_micros": 100}}, 0, {"": (5, 0, 100, 0)}),  # the same snapshot again
    (1, {"": {"allowed": 5, "cost_micros": 100}}, 0, {"": (5, 0, 100, 0)}),  # newer, the same counts: not rewritten
    (-1, {"": {"allowed": 9, "cost_micros": 900}}, 0, {"": (5, 0, 100, 0)}),  # an older snapshot never wins
    # Newer and different: request counters never decrease, cost is copied as read (reconciled lower).
    (2, {"": {"allowed": 3, "denied_rate": 2, "cost_micros": 50}}, 1, {"": (5, 2, 50, 2)}),
    (
        3,
        {"": {"allowed": 7, "denied_rate": 2, "cost_micros": 50}, "search": {"allowed": 1}},
        2,
        {"": (7, 2, 50, 3), "search": (1, 0, 0, 3)},
    ),
]


def step_rows(counts_by_scope: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    return [
        {"client": "u.1", "plan_key": 0, "scope": scope, "day": T.date().isoformat(), "generation": "",
         "counters": {c: counts.get(c, 0) for c in COUNTERS}}
        for scope, counts in counts_by_scope.items()
    ]  # fmt: skip


def seen(step: dict[str, Any]) -> tuple[int, dict[str, tuple[int, int, int, int]]]:
    """A step's rows written, and the rows after it in the form of STEPS."""
    after = {
        r["scope"]: (
            r["allowed"], r["denied_rate"], r["cost_micros"],
            int((datetime.fromisoformat(r["observed_at"]) - T).total_seconds()),
        )
        for r in step["rows"]
    }  # fmt: skip
    return step["written"], after


def expected() -> list[tuple[int, dict[str, tuple[int, int, int, int]]]]:
    return [(written, after) for _, _, written, after in STEPS]


@pytest.mark.slow
def test_write_rules_on_mariadb(mariadb, redis_server, tmp_path):
    """MariaDB's upsert follows the flush's rules step by step (the steps of STEPS)."""
    steps = [{"observed_at": (T + timedelta(seconds=at)).isoformat(), "rows": step_rows(c)} for at, c, _, _ in STEPS]
    steps_file = tmp_path / "steps.json"
    steps_file.write_text(json.dumps(steps))

    done = mariadb.run(redis_server.url, "reset", "+", "write", str(steps_file))

    assert [seen(step) for step in done["steps"]] == expected()


@pytest.mark.django_db
def test_write_rules_on_the_session_database():
    """The same steps on this session's database (SQLite, or PostgreSQL in CI) give the same rows."""
    done = []
    for at, counts_by_scope, _, _ in STEPS:
        batch = {
            RowKey(r["client"], r["plan_key"], r["scope"], T.date(), r["generation"]): r["counters"]
            for r in step_rows(counts_by_scope)
        }
        done.append({"written": write_rows(batch, T + timedelta(seconds=at)), "rows": usage_rows()})

    assert [seen(step) for step in done] == expected()
