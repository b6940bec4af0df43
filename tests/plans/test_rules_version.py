"""A rules change tells every process by bumping the version in Redis, even when Redis is down at that moment."""

from __future__ import annotations

import logging
import time

import pytest

from plans.models import APIKey
from quotas.contract.keys import rules_version_key
from quotas.runtime import get_runtime
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
    rules = get_runtime().rules
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
    rules = get_runtime().rules
    rules.current()
    version_key = rules_version_key(quota_settings.KEY_PREFIX)
    before = int(redis_client.get(version_key) or 0)
    with django_capture_on_commit_callbacks(execute=True):
        key.revoke()
    for _ in range(3):
        rules.poll()  # the poller's visits
    assert int(redis_client.get(version_key) or 0) == before + 1
