"""A controller run against the test Redis and database (adaptive/controller.py, publish.py, tasks.py)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import DatabaseError
from prometheus_client import REGISTRY

from adaptive import controller, store
from adaptive.controller import read_state, run_controller
from adaptive.models import AdaptiveConfig, AdaptiveSnapshot, MultiplierOverride
from adaptive.publish import publish_multipliers, read_multipliers
from adaptive.reporter import publish_sample, read_samples
from adaptive.tasks import control
from tests.factories import PlanFactory
from tests.store_client import board_of
from tests.waiting import wait_until

from .conftest import DEFAULT_PARAMS

#: These tests are of the controller acting on limits: it enforces (the default only observes: test_mode.py).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enforce")]

T0 = 1_800_000_000.0


@pytest.fixture
def plans() -> dict:
    return {
        "free": PlanFactory(slug="free", priority=0, is_default=True),
        "pro": PlanFactory(slug="pro", priority=5),
        "enterprise": PlanFactory(slug="enterprise", priority=10),
    }


def report(redis_client, cpu: float, host: str = "web1", pid: int = 1, db: float | None = None, ttl: float = 5.0):
    """Publish one process's sample as its reporter thread would."""
    sample = {"host": host, "pid": pid, "at": time.time(), "cpu": cpu, "memory": 0.4, "db": db, "redis_ms": 0.2}
    publish_sample(board_of(redis_client), sample, ttl)


def ids(plans: dict) -> tuple[int, int, int]:
    return plans["free"].pk, plans["pro"].pk, plans["enterprise"].pk


def test_a_run_publishes_every_plan_and_records_the_change(redis_client, plans) -> None:
    """The first run publishes 1.0 for every plan with updated_at, expiring after PUBLISH_TTL, and one snapshot."""
    free, pro, ent = ids(plans)
    report(redis_client, cpu=0.3)
    outcome = run_controller(board_of(redis_client), now=T0)
    assert outcome.changed
    assert read_multipliers(board_of(redis_client)) == {free: 1.0, pro: 1.0, ent: 1.0}
    body = json.loads(redis_client.get(store.multipliers_key()))
    assert body["updated_at"] == T0
    assert 55_000 < redis_client.pttl(store.multipliers_key()) <= 60_000
    (snapshot,) = AdaptiveSnapshot.objects.all()
    assert snapshot.multipliers == {str(free): 1.0, str(pro): 1.0, str(ent): 1.0}
    assert snapshot.signals["observed"]["cpu"] == 0.3
    assert snapshot.signals["hosts"] == 1


def test_only_changes_are_recorded(redis_client, plans) -> None:
    """Runs that publish the same multipliers add no snapshot; a cut adds one with its reason."""
    free, _, ent = ids(plans)
    report(redis_client, cpu=0.3)
    run_controller(board_of(redis_client), now=T0)
    run_controller(board_of(redis_client), now=T0 + 5)
    assert AdaptiveSnapshot.objects.count() == 1
    report(redis_client, cpu=0.97)
    outcome = run_controller(board_of(redis_client), now=T0 + 10)
    assert outcome.action == "cut"
    published = read_multipliers(board_of(redis_client))
    assert published[free] < 1.0
    assert published[ent] == 1.0
    latest = AdaptiveSnapshot.objects.latest()
    assert latest.reason.startswith("cut: cpu")
    assert latest.level == pytest.approx(0.7)
    assert AdaptiveSnapshot.objects.count() == 2


def test_state_is_kept_in_redis_between_runs(redis_client, plans) -> None:
    """EWMA values, the level and the timers live in Redis, so any worker can run the next tick."""
    report(redis_client, cpu=0.97)
    run_controller(board_of(redis_client), now=T0)
    state = read_state(board_of(redis_client))
    assert state["level"] == pytest.approx(0.7)
    assert state["fast"]["cpu"] == pytest.approx(0.97)
    assert state["last_cut_at"] == T0
    assert state["multipliers"][str(plans["free"].pk)] < 1.0
    report(redis_client, cpu=0.97)
    run_controller(board_of(redis_client), now=T0 + 5)  # critical: cut again from the stored level
    assert read_state(board_of(redis_client))["level"] == pytest.approx(0.49)


@pytest.mark.redis
@pytest.mark.slow  # waits 0.2 s for a sample's TTL on the Redis server, whose clock no test moves
def test_hosts_that_stop_reporting_drop_out(redis_client, plans) -> None:
    """A sample lives SAMPLE_TTL seconds; the index forgets keys long expired."""
    report(redis_client, cpu=0.97, host="a", ttl=0.2)
    report(redis_client, cpu=0.3, host="b")
    assert {s["host"] for s in read_samples(board_of(redis_client), time.time())} == {"a", "b"}
    assert wait_until(
        lambda: {s["host"] for s in read_samples(board_of(redis_client), time.time())} == {"b"}, 2
    )  # Redis's TTL
    outcome = run_controller(board_of(redis_client), now=T0)
    assert outcome.signals["hosts"] == 1
    assert outcome.action == "hold"
    read_samples(board_of(redis_client), time.time() + 3600)
    assert redis_client.zcard(store.hosts_key()) == 0


def test_pinned_multiplier_is_published(redis_client, plans) -> None:
    """An active pin replaces the computed value; an expired one is ignored; the latest active pin wins."""
    free, pro, ent = ids(plans)
    now = time.time()
    at = datetime.fromtimestamp(now, tz=UTC)
    MultiplierOverride.objects.create(plan=plans["pro"], multiplier=0.5, reason="incident 12")
    MultiplierOverride.objects.create(plan=plans["pro"], multiplier=0.4, reason="incident 12, tighter")
    MultiplierOverride.objects.create(plan=plans["free"], multiplier=0.2, reason="old", expires_at=at - timedelta(1))
    report(redis_client, cpu=0.3)
    outcome = run_controller(board_of(redis_client), now=now)
    assert read_multipliers(board_of(redis_client)) == {free: 1.0, pro: 0.4, ent: 1.0}
    assert "pinned: pro=0.40" in outcome.reason


@pytest.mark.parametrize("switch", ["setting", "admin"])
def test_switched_off_publishes_pins_else_one(redis_client, plans, set_quotas, switch) -> None:
    """With QUOTAS['ADAPTIVE']['ENABLED'] False or the admin switch off, overload changes nothing but pins apply."""
    free, pro, ent = ids(plans)
    if switch == "setting":
        set_quotas("ADAPTIVE", ENABLED=False)
    else:
        AdaptiveConfig.objects.create(enabled=False)
    MultiplierOverride.objects.create(plan=plans["enterprise"], multiplier=0.9, reason="maintenance")
    report(redis_client, cpu=0.99)
    outcome = run_controller(board_of(redis_client), now=time.time())
    assert outcome.action == "off"
    assert read_multipliers(board_of(redis_client)) == {free: 1.0, pro: 1.0, ent: 0.9}


def test_admin_switch_is_a_singleton() -> None:
    """Saving another AdaptiveConfig updates the one row."""
    AdaptiveConfig(enabled=False).save()
    AdaptiveConfig(enabled=True).save()
    assert list(AdaptiveConfig.objects.values_list("pk", "enabled")) == [(1, True)]
    assert AdaptiveConfig.is_enabled()


def test_old_snapshots_are_deleted(redis_client, plans, set_quotas) -> None:
    """Rows older than RETENTION_DAYS are deleted by the run (at most once an hour)."""
    set_quotas("ADAPTIVE", RETENTION_DAYS=7)
    now = time.time()
    at = datetime.fromtimestamp(now, tz=UTC)
    old = AdaptiveSnapshot.objects.create(created_at=at - timedelta(days=8), level=1, reason="old")
    kept = AdaptiveSnapshot.objects.create(created_at=at - timedelta(days=6), level=1, reason="recent")
    report(redis_client, cpu=0.3)
    run_controller(board_of(redis_client), now=now)
    remaining = set(AdaptiveSnapshot.objects.values_list("pk", flat=True))
    assert old.pk not in remaining
    assert kept.pk in remaining
    assert read_state(board_of(redis_client))["pruned_at"] == now


def test_database_unreadable_keeps_the_known_plans_and_pins(redis_client, plans, monkeypatch) -> None:
    """If the database fails, the run goes on with the plans and pins it last read (a pin still expires)."""
    free, pro, ent = ids(plans)
    now = time.time()
    until = datetime.fromtimestamp(now + 60, tz=UTC)
    MultiplierOverride.objects.create(plan=plans["enterprise"], multiplier=0.9, reason="x", expires_at=until)
    report(redis_client, cpu=0.3)
    run_controller(board_of(redis_client), now=now)

    def broken(now: float):
        raise DatabaseError("connection refused")

    monkeypatch.setattr(controller, "load_inputs", broken)
    report(redis_client, cpu=0.97)
    outcome = run_controller(board_of(redis_client), now=now + 5)
    assert outcome.action == "cut"
    published = read_multipliers(board_of(redis_client))
    assert set(published) == {free, pro, ent}
    assert published[ent] == 0.9
    run_controller(board_of(redis_client), now=now + 61)
    assert read_multipliers(board_of(redis_client))[ent] != 0.9


def test_overlapping_runs_skip(redis_client, plans) -> None:
    """A run that finds another holding the lock does nothing."""
    redis_client.set(store.lock_key(), "someone else")
    assert run_controller(board_of(redis_client), now=T0) is None
    assert redis_client.get(store.multipliers_key()) is None


def test_celery_task_runs_the_controller(redis_client, plans) -> None:
    """The beat task (run in process here; a real worker in test_end_to_end) publishes and reports."""
    report(redis_client, cpu=0.97)
    result = control.apply().get()
    assert result["action"] == "cut"
    assert read_multipliers(board_of(redis_client))[plans["free"].pk] < 1.0


def test_celery_task_survives_redis_down(redis_server, plans) -> None:
    """With Redis unreachable the task logs and returns; beat sends the next one."""
    redis_server.stop()
    try:
        assert control.apply().get() is None
    finally:
        redis_server.start()


def test_read_multipliers_is_strict_about_what_it_returns(redis_client) -> None:
    """Missing key: {}; only plan ids with 0 < m <= 1 come back; broken JSON is {}."""
    assert read_multipliers(board_of(redis_client)) == {}
    publish_multipliers(board_of(redis_client), {1: 0.5, 2: 1.0}, T0, ttl=60)
    assert read_multipliers(board_of(redis_client)) == {1: 0.5, 2: 1.0}
    redis_client.set(
        store.multipliers_key(), json.dumps({"1": 0.5, "x": 0.3, "2": 0, "3": 7, "4": "a", "updated_at": 1})
    )
    assert read_multipliers(board_of(redis_client)) == {1: 0.5}
    redis_client.set(store.multipliers_key(), b"{not json")
    assert read_multipliers(board_of(redis_client)) == {}
    redis_client.set(store.multipliers_key(), b"[1, 2]")
    assert read_multipliers(board_of(redis_client)) == {}


def test_keys_use_the_quota_prefix(settings) -> None:
    """Every adaptive key starts with QUOTAS['KEY_PREFIX']."""
    settings.QUOTAS = {**settings.QUOTAS, "KEY_PREFIX": "q:v9"}
    assert store.multipliers_key() == "q:v9:adaptive:multipliers"
    assert store.host_key("web 1", 42).startswith("q:v9:adaptive:host:~")
    assert store.host_key("web1", 42) == "q:v9:adaptive:host:web1:42"


def test_settings_defaults_are_the_tested_parameters(settings) -> None:
    """The defaults of adaptive.conf are the parameters the policy tests use."""
    settings.QUOTAS = {**settings.QUOTAS, "ADAPTIVE": {}}
    assert controller.params_from_settings() == DEFAULT_PARAMS


def test_multipliers_and_signals_are_exported_as_metrics(redis_client, plans) -> None:
    """Each run sets quota_adaptive_multiplier per plan slug and quota_load_signal per host and signal."""
    report(redis_client, cpu=0.97, host="web-7", pid=1)
    report(redis_client, cpu=0.5, host="web-7", pid=2)
    run_controller(board_of(redis_client), now=T0)
    assert REGISTRY.get_sample_value("quota_adaptive_multiplier", {"plan": "free"}) < 1.0
    assert REGISTRY.get_sample_value("quota_adaptive_multiplier", {"plan": "enterprise"}) == 1.0
    assert REGISTRY.get_sample_value("quota_load_signal", {"signal": "cpu", "host": "web-7"}) == 0.97
    assert REGISTRY.get_sample_value("quota_load_signal", {"signal": "memory", "host": "web-7"}) == 0.4


def test_the_controller_runs_on_the_memory_store(plans, set_quotas) -> None:
    """With REDIS_URL = "memory://" (single-process development), a run takes its lock, publishes every
    plan's multiplier where the engine reads them, and a second run while the first holds the lock skips."""
    from quotas.store.backends.connect import connect
    from quotas.store.backends.memory import forget

    forget("memory://adaptive")
    set_quotas(REDIS_URL="memory://adaptive")
    client = connect("memory://adaptive", 1.0)
    free, pro, ent = ids(plans)
    report(client, cpu=0.3)
    assert run_controller(board_of(client), now=T0).changed
    assert read_multipliers(board_of(client)) == {free: 1.0, pro: 1.0, ent: 1.0}
    held = client.lock(store.lock_key(), timeout=10, blocking=False)
    assert held.acquire()
    assert run_controller(board_of(client), now=T0 + 10) is None  # another run is in progress
    held.release()
    assert run_controller(board_of(client), now=T0 + 20) is not None
    forget("memory://adaptive")
