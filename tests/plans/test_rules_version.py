"""A rules change tells every process by bumping the version in Redis, even when Redis is down at that moment; and
while Redis stays down, through the change mark in the database."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

import pytest
from django.db import connection

from plans.models import APIKey, RulesChange
from quotas.contract.keys import rules_version_key
from quotas.engine import default_engine
from quotas.internal_api import hash_api_key
from quotas.runtime import build_runtime
from quotas.runtime.rules_cache import RulesCache
from quotas.settings import quota_settings
from tests.factories import issue_key
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

INTERVAL = 0.1


def wait_for(condition, timeout: float) -> float | None:
    """Seconds until ``condition()`` held, or None if it did not within ``timeout``."""
    started = time.monotonic()
    return time.monotonic() - started if wait_until(condition, timeout, every=0.02) else None


def test_a_revocation_while_redis_is_down_bumps_the_version_once_redis_is_back(
    redis_server, redis_client, set_quotas, django_capture_on_commit_callbacks, caplog
):
    """Revoked during an outage: the bump Redis refused is retried by the poller, and lands within a few intervals.

    Without the retry the version stayed where it was, so processes that never saw Redis fail kept serving
    the revoked key from their caches until some later rules change.
    """
    set_quotas(RULES_CHECK_INTERVAL=INTERVAL)
    issue_key()
    key = APIKey.objects.get()
    rules = default_engine.runtime().rules
    rules.current()  # this process's poller runs, as in a worker that has served requests
    version_key = rules_version_key(quota_settings.KEY_PREFIX)
    caplog.set_level(logging.WARNING, logger="quotas.runtime.rules_cache")

    redis_server.stop()
    try:
        with django_capture_on_commit_callbacks(execute=True):
            key.revoke()  # committed: the bump runs now, and Redis refuses it
        retried = wait_until(lambda: rules._bump_failures >= 3, 10 * INTERVAL + 1)  # the poller retries, in vain
        assert retried, "the poller did not retry the bump"
    finally:
        redis_server.start()  # empty: without the retried bump, the version key would stay absent

    landed_after = wait_for(lambda: redis_client.get(version_key) is not None, timeout=10 * INTERVAL + 1)
    assert landed_after is not None, "the owed bump never reached Redis"
    assert redis_client.get(version_key) == b"1"  # bumped once, not once per failed attempt
    for _ in range(3):
        rules.poll()  # the poller's visits
    assert redis_client.get(version_key) == b"1"  # and no longer owed
    messages = [record.getMessage() for record in caplog.records]
    assert sum("could not bump the rules version" in m for m in messages) == 1, messages
    assert sum("rules version bumped after" in m for m in messages) == 1, messages


def test_a_bump_that_lands_is_not_repeated(redis_client, set_quotas, django_capture_on_commit_callbacks):
    """With Redis up a change bumps the version once, and the poller adds nothing."""
    set_quotas(RULES_CHECK_INTERVAL=INTERVAL)
    issue_key()
    key = APIKey.objects.get()
    rules = default_engine.runtime().rules
    rules.current()
    version_key = rules_version_key(quota_settings.KEY_PREFIX)
    before = int(redis_client.get(version_key) or 0)
    with django_capture_on_commit_callbacks(execute=True):
        key.revoke()
    for _ in range(3):
        rules.poll()  # the poller's visits
    assert int(redis_client.get(version_key) or 0) == before + 1


def accepts(rules: RulesCache, raw: str) -> bool:
    """Whether a request with key ``raw`` authenticates on ``rules``, looked up as a request looks it up (a stale
    snapshot reloaded first, see quotas.drf.authentication)."""
    rules.current()
    subscriber = rules.subscriber_for_key(hash_api_key(raw))
    return subscriber is not None and not subscriber.revoked


# transaction=True: the revocation commits (its on_commit hooks run for real), and the other runtime's poller reads
# the database on a thread of its own, which sees committed rows only.
@pytest.mark.django_db(transaction=True)
def test_a_key_revoked_while_redis_is_down_is_refused_by_another_process_within_two_seconds(
    redis_server, redis_client, set_quotas
):
    """Redis down: the rules version reads "?" before and after the revocation, so the other process's poller asks
    the database's change mark instead (about once a second) and reloads. Before the mark, the other process kept
    accepting the revoked key until Redis came back."""
    set_quotas(RULES_CHECK_INTERVAL=INTERVAL)
    raw = issue_key()
    key = APIKey.objects.get()
    here = default_engine.runtime()  # this process, where the key is revoked (the model's signals reach its runtime)
    here.rules.current()
    there = build_runtime()  # another process: its own snapshot, caches and poller, on the same database and Redis
    there.poller.ensure()
    try:
        assert accepts(there.rules, raw)
        redis_server.stop()
        # The other process sees Redis go (its version now reads "?") and reloads; the key still works there.
        assert wait_until(lambda: accepts(there.rules, raw) and there.rules.current().version == "?", 5)
        marked = RulesChange.count()
        key.revoke()  # committed: the Redis bump fails (owed), the database's change mark moves
        assert RulesChange.count() == marked + 1
        assert not accepts(here.rules, raw)  # this process at once
        took = wait_for(lambda: not accepts(there.rules, raw), timeout=2.5)
        assert took is not None, "the other process still accepts the revoked key while Redis is down"
    finally:
        there.close()
        redis_server.start()


@contextlib.contextmanager
def counter_table_gone() -> Iterator[None]:
    """The change counter's table renamed away: every query of it fails in the database (OperationalError)."""
    table = RulesChange._meta.db_table
    with connection.schema_editor() as editor:
        editor.alter_db_table(RulesChange, table, table + "_gone")
    try:
        yield
    finally:
        with connection.schema_editor() as editor:
            editor.alter_db_table(RulesChange, table + "_gone", table)


@pytest.mark.django_db(transaction=True)
def test_a_change_mark_the_database_refused_is_moved_by_the_poller(set_quotas, caplog):
    """The commit's move of the mark fails (the table is away): it is owed, and the next poll makes it, once."""
    set_quotas(RULES_CHECK_INTERVAL=0)  # the test is the poller
    rules = default_engine.runtime().rules
    rules.current()
    before = RulesChange.count()
    caplog.set_level(logging.WARNING, logger="quotas.runtime.change_mark")
    with counter_table_gone():
        rules.committed()  # no exception: the commit that called it has happened
        rules.poll()  # still refused
    rules.poll()
    rules.poll()
    assert RulesChange.count() == before + 1
    messages = [record.getMessage() for record in caplog.records]
    assert sum("could not move the rules change mark" in m for m in messages) == 1, messages
    assert sum("moved after 2 failed attempts" in m for m in messages) == 1, messages
