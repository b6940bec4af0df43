"""Web processes publish their host's load from a background thread (adaptive/reporter.py, middleware.py, load.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest
import redis
from django.db.utils import ConnectionHandler
from django.test import Client

from adaptive import reporter, store
from adaptive.load import CpuMeter, db_pool_saturation, db_server_saturation, host_name, host_sample
from tests.waiting import wait_until

pytestmark = pytest.mark.usefixtures("no_reporter")


def wait_for(condition: Callable[[], object], timeout: float = 5.0) -> object:
    return wait_until(condition, timeout)


def reporter_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "adaptive-load" and t.is_alive()]


@pytest.fixture
def reporting(set_quotas) -> None:
    """Reporting on (test settings keep it off), once a second."""
    set_quotas("ADAPTIVE", REPORT_INTERVAL=1.0, SAMPLE_TTL=5.0)


@pytest.mark.slow
def test_a_request_starts_one_reporter_per_process(reporting, redis_client) -> None:
    """The first request starts the thread; later requests do not start another; samples expire in SAMPLE_TTL."""
    client = Client()
    client.get("/healthz")
    threads = reporter_threads()
    assert len(threads) == 1
    for _ in range(5):
        client.get("/healthz")
    assert reporter_threads() == threads
    key = store.host_key(host_name(), os.getpid())
    # The first sample comes after one REPORT_INTERVAL; the deadline leaves a busy machine room, and the wait ends
    # as soon as the sample is there.
    assert wait_for(lambda: redis_client.get(key), timeout=15)
    sample = json.loads(redis_client.get(key))
    assert sample["host"] == host_name()
    assert sample["pid"] == os.getpid()
    assert 0 <= sample["cpu"] <= 1
    assert 0 < sample["memory"] <= 1
    assert {"latency_ms", "latency", "error_rate", "errors"} <= set(sample)  # None: fewer than MIN_RESPONSES
    assert 0 < redis_client.pttl(key) <= 5000
    assert redis_client.zscore(store.hosts_key(), key) is not None


def test_requests_never_wait_for_measurements(reporting, redis_client, monkeypatch) -> None:
    """Even a measurement that has not ended does not slow a request: it runs in the reporter thread. The
    measurement is held until the requests are done: a request that waited for it would only be answered once
    the hold ends (after 10 s), so the requests answered while it still holds never waited, however slow the
    machine."""
    seen: list[str] = []
    began, release, ended = threading.Event(), threading.Event(), threading.Event()

    def held_sample(cpu: CpuMeter, redis_ms: float | None = None) -> dict:
        seen.append(threading.current_thread().name)
        began.set()
        release.wait(10)
        ended.set()
        return host_sample(cpu, redis_ms)

    monkeypatch.setattr(reporter, "host_sample", held_sample)
    client = Client()
    try:
        client.get("/healthz")  # starts the reporter
        assert began.wait(15), "the reporter never measured"
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
        assert not ended.is_set()  # answered while the measurement still held
    finally:
        release.set()
    assert set(seen) == {"adaptive-load"}


def test_reporting_off_starts_no_thread(set_quotas) -> None:
    """REPORT_INTERVAL = 0 (the test settings' default) starts nothing."""
    set_quotas("ADAPTIVE", REPORT_INTERVAL=0)
    Client().get("/healthz")
    assert reporter_threads() == []


def _child(queue: multiprocessing.Queue, url: str) -> None:
    """The forked process: starts its reporter, and waits (with a deadline) for its first sample."""
    reporter.ensure_reporter()
    client = redis.Redis.from_url(url)
    wait_for(lambda: client.get(store.host_key(host_name(), os.getpid())), timeout=15)
    queue.put([t.name for t in reporter_threads()])


@pytest.mark.redis
@pytest.mark.slow
def test_a_forked_process_starts_its_own_reporter(reporting, redis_client, redis_server) -> None:
    """After fork() (a gunicorn worker), the child sees the parent's thread is not its own and starts one."""
    reporter.ensure_reporter()
    assert len(reporter_threads()) == 1
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue, redis_server.url))
    child.start()
    names = queue.get(timeout=30)
    child.join(timeout=10)
    assert names == ["adaptive-load"]
    assert redis_client.get(store.host_key(host_name(), child.pid)) is not None


@pytest.mark.slow  # a real process burning a core for a second
def test_cpu_meter_sees_a_busy_core() -> None:
    """One process spinning for a second shows as at least the CPU time it used, over the CPUs the meter counts:
    the meter reads every process's time, so other jobs on the machine can only raise the reading."""
    meter = CpuMeter()
    started, children = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    burn = "import time\nend = time.time() + 1\nwhile time.time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    busy = meter.read()
    elapsed, after = time.monotonic() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    burned = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    cpus = meter.cpus or os.cpu_count() or 1
    assert burned > 0
    assert busy >= burned / (elapsed * cpus) - 0.05  # the meter's clock-tick granularity
    assert 0 <= busy <= 1


def test_sqlite_has_no_db_signal() -> None:
    """SQLite has no pool and no connection limit: the db signal is None (unavailable), not 0."""
    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}})
    conn = handler["default"]
    try:
        assert db_pool_saturation(conn) is None
        assert db_server_saturation(conn) is None
    finally:
        conn.close()


@pytest.mark.django_db
def test_a_sample_has_every_signal(settings) -> None:
    """host, pid, time, cpu and memory fractions, db (None on SQLite), Redis latency."""
    sample = host_sample(CpuMeter(), redis_ms=0.5)
    assert set(sample) == {"host", "pid", "at", "cpu", "memory", "db", "redis_ms"}
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        assert sample["db"] is None
    else:
        assert 0 <= sample["db"] <= 1
    assert sample["redis_ms"] == 0.5
