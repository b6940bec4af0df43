"""Usage counted in-process reaches Redis exactly once, and the spool replays only what this project wrote."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

import pytest
from django.core import signing

from quotas.engine import default_engine
from quotas.store.money.budget_day import day_of
from quotas.store.usage_batches import STALE_CLAIM_SECONDS, Batch, UsageBuffer, replay_spool, spool_batches, spool_dir
from tests.usage_counters import usage_totals

TODAY = time.strftime("%Y%m%d", time.gmtime())


@pytest.fixture
def base(runtime):
    """The usage key base of two clients in different buckets of the test Redis."""
    return [runtime.store.keys_of("{s.1}").usage_base, runtime.store.keys_of("{s.2}").usage_base]


def test_spool_directory_is_private_and_namespaced(settings, tmp_path):
    """0700, owned by this user, one subdirectory per Redis URL and key prefix."""
    settings.QUOTAS = {**settings.QUOTAS, "USAGE_SPOOL_DIR": str(tmp_path / "spool")}
    here = spool_dir()
    assert stat.S_IMODE(here.stat().st_mode) == 0o700
    assert stat.S_IMODE(here.parent.stat().st_mode) == 0o700
    settings.QUOTAS = {**settings.QUOTAS, "KEY_PREFIX": "other-project:v1"}
    assert spool_dir() != here
    assert spool_dir().parent == here.parent


def test_a_group_readable_spool_directory_is_made_private(settings, tmp_path):
    folder = tmp_path / "spool"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    settings.QUOTAS = {**settings.QUOTAS, "USAGE_SPOOL_DIR": str(folder)}
    spool_dir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_spooled_usage_is_replayed_once(redis_client, base):
    """Replaying the same file twice (a copy, or a replay cut short and retried) adds its counts once."""
    batch = Batch(0, {(base[0], TODAY, "s.1|1|-|a"): 3, (base[1], TODAY, "s.2|1|-|dr"): 2})
    path = spool_batches("writer-a", [batch])
    copy = path.read_bytes()
    assert replay_spool(redis_client) == 1
    path.write_bytes(copy)
    assert replay_spool(redis_client) == 1
    totals = usage_totals(redis_client)
    assert (totals["a"], totals["dr"]) == (3, 2)


def test_a_replay_that_failed_halfway_adds_only_what_is_missing(redis_client, base):
    """The second hash cannot take the batch (a real Redis error); after a fix, the retry adds only it."""
    batch = Batch(0, {(base[0], TODAY, "s.1|1|-|a"): 3, (base[1], TODAY, "s.2|1|-|a"): 2})
    second = sorted(f"{b}:{TODAY}" for b in base)[1]  # written after the first
    redis_client.set(second, "not a hash")  # WRONGTYPE for the second script call
    spool_batches("writer-a", [batch])
    assert replay_spool(redis_client) == 0
    assert len(list(spool_dir().glob("*.spool"))) == 1  # given back for the next try
    redis_client.delete(second)
    assert replay_spool(redis_client) == 1
    assert usage_totals(redis_client)["a"] == 5  # not 8: the first hash skipped the batch it had


def test_forged_spool_files_are_not_replayed(redis_client, base):
    """A file anyone else dropped there (unsigned, or signed with another key) is set aside, not counted."""
    folder = spool_dir()
    rows = {"writer": "w", "batches": [{"seq": 0, "rows": [[base[0], TODAY, "s.1|1|-|a", 1000]]}]}
    (folder / "1-1.spool").write_text(json.dumps(rows))
    (folder / "1-2.spool").write_text(signing.dumps(rows, key="another-secret", salt="quotas.usage_spool"))
    assert replay_spool(redis_client) == 0
    assert usage_totals(redis_client) == {}
    assert sorted(p.name for p in folder.iterdir()) == ["1-1.rejected", "1-2.rejected"]


def test_a_claim_left_by_a_dead_replayer_is_taken_over(redis_client, base):
    """A .replaying file whose process is gone is replayed by the next process."""
    path = spool_batches("writer-a", [Batch(0, {(base[0], TODAY, "s.1|1|-|a"): 4})])
    # A process that has ended: spawned, not forked (os.fork warns in a process with threads, as this one has).
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    dead = ended.pid
    path.rename(path.with_name(f"{path.stem}.{dead}.replaying"))
    assert replay_spool(redis_client) == 1
    assert usage_totals(redis_client)["a"] == 4
    assert not list(spool_dir().iterdir())


def test_a_recent_claim_of_a_live_replayer_is_left_alone(redis_client, base):
    path = spool_batches("writer-a", [Batch(0, {(base[0], TODAY, "s.1|1|-|a"): 4})])
    claimed = path.with_name(f"{path.stem}.{os.getppid()}.replaying")
    path.rename(claimed)
    assert replay_spool(redis_client) == 0
    old = time.time() - STALE_CLAIM_SECONDS - 1
    os.utime(claimed, (old, old))
    assert replay_spool(redis_client) == 1


def test_buffer_writes_a_batch_once_even_when_a_write_failed_halfway(redis_client, base):
    """In-process usage: a batch that failed on one hash is retried without double-counting the others."""
    buffer = UsageBuffer()
    buffer.add(base[0], "s.1|1|-|a", 3, day=TODAY)  # the day named here, even if UTC midnight passed since import
    buffer.add(base[1], "s.2|1|-|a", 2, day=TODAY)
    broken = f"{base[1]}:{TODAY}"
    redis_client.set(broken, "not a hash")
    assert not buffer.flush(redis_client)
    buffer.add(base[0], "s.1|1|-|a", 1, day=TODAY)  # counted meanwhile: a later batch
    redis_client.delete(broken)
    assert buffer.flush(redis_client)
    assert usage_totals(redis_client)["a"] == 6
    assert not buffer


def test_engine_exit_spools_into_the_private_directory(redis_server, redis_client, runtime, base):
    runtime.guard.usage_buffer.add(base[0], "s.1|1|-|a", 2)
    redis_server.stop()
    try:
        assert not default_engine.runtime().guard.usage.flush_usage(spool_on_failure=True)
    finally:
        redis_server.start()
    (path,) = spool_dir().glob("*.spool")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert replay_spool(redis_client) == 1
    assert usage_totals(redis_client)["a"] == 2


@pytest.mark.parametrize("store", [pytest.param("memory"), pytest.param("redis", marks=pytest.mark.redis)])
def test_usage_of_a_day_past_its_retention_leaves_no_key_that_never_expires(store, redis_client, base, quota_clock):
    """A batch counted on a day whose usage hash is past its retention (USAGE_TTL_DAYS after the day: a buffer
    held through a long outage, an old spool file replayed) is written to a hash whose expiry is already past,
    which deletes it; the batch's mark ("~w:<writer>") written after that made the hash again with no expiry at
    all, one key per bucket that lived forever."""
    long_ago = day_of(quota_clock.now() - 10 * 86_400)
    buffer = UsageBuffer(quota_clock)
    buffer.add(base[0], "s.1|1|-|a", 3, day=long_ago)
    assert buffer.flush(redis_client)
    assert redis_client.exists(f"{base[0]}:{long_ago}") == 0
    assert not buffer
