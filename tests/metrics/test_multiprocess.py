"""A real gunicorn with 3 workers (``-c config/gunicorn.py``): /metrics counts every request exactly once.

Each worker keeps its metrics in its own files under PROMETHEUS_MULTIPROC_DIR
and /metrics sums them. Also checked: stale files of an earlier run are removed
at start-up, and a dead worker's live gauges go while its counts stay.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from config.embedded_redis import free_port
from demo.seed import demo_key
from tests.process_groups import stop_groups
from tests.sqlite_template import SqliteTemplates

from .test_metrics import promtool_check
from .urls import TEST_PLAN

BASE_DIR = Path(__file__).resolve().parents[2]
WORKERS = 3
N = 300
SENDERS = 6
STALE_COUNT = 1000

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


@dataclass
class Gunicorn:
    process: subprocess.Popen
    port: int
    metrics_dir: Path
    stale_files: list[str]
    log: Path

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def remaining(self, path: str, key: str) -> tuple[int, str]:
        """Status and X-RateLimit-Remaining of one GET with API key ``key``."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers={"X-API-Key": key})
            response = conn.getresponse()
            response.read()
            return response.status, response.getheader("X-RateLimit-Remaining", "")
        finally:
            conn.close()

    def workers(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.NoSuchProcess):
            return psutil.Process(self.process.pid).children()
        return []

    def decisions(self, plan: str) -> float:
        """quota_decisions_total of ``plan`` over every label, as /metrics serves it."""
        status, body = self.get("/metrics")
        assert status == 200, body
        return sum(
            sample.value
            for family in text_string_to_metric_families(body.decode())
            if family.name == "quota_decisions"
            for sample in family.samples
            if sample.name == "quota_decisions_total" and sample.labels.get("plan") == plan
        )


def stale_metrics(metrics_dir: Path, env: dict[str, str]) -> list[str]:
    """Files an earlier (now dead) process left: STALE_COUNT decisions of the test plan."""
    code = (
        "from quotas import metrics\n"
        f"for _ in range({STALE_COUNT}): metrics.observe_decision({TEST_PLAN!r}, 'record', 'allowed', 'none', 0.0)\n"
        "metrics.set_engine_mode('fallback')\n"
    )
    before = set(os.listdir(metrics_dir))
    subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=env, check=True, timeout=30)
    return sorted(set(os.listdir(metrics_dir)) - before)


def wait_for(condition, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            if condition():
                return
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout} s\n" + log.read_text(errors="replace")[-3000:])
        time.sleep(0.1)


@contextlib.contextmanager
def running_gunicorn(
    redis_url: str, tmp: Path, workers: int, templates: SqliteTemplates, *, stale: bool = False
) -> Iterator[Gunicorn]:
    """gunicorn with ``workers`` workers (``-c config/gunicorn.py``) on a migrated and seeded SQLite file in
    ``tmp``, the Redis at ``redis_url`` and a fresh metrics directory (holding an earlier process's files when
    ``stale``); stopped on exit."""
    metrics_dir = tmp / "prometheus"
    metrics_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "METRICS_TOKEN", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.metrics.gunicorn_settings",
        SQLITE_PATH=str(tmp / "db.sqlite3"),
        REDIS_URL=redis_url,
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
        ADAPTIVE_REPORT_INTERVAL="0",
    )
    templates.copy(tmp / "db.sqlite3", env, seeded=True)
    stale_files = stale_metrics(metrics_dir, env) if stale else []
    port = free_port()
    log = tmp / "gunicorn.log"
    argv = [
        sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--graceful-timeout", "2",
        "--no-control-socket",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = Gunicorn(proc, port, metrics_dir, stale_files, log)
    try:
        wait_for(lambda: len(server.workers()) == workers, 20, "gunicorn did not start its workers", log)
        wait_for(lambda: server.get("/healthz")[0] == 200, 20, "gunicorn did not answer /healthz", log)
        yield server
    finally:
        stop_groups([proc])


@pytest.fixture(scope="module")
def gunicorn(redis_server, tmp_path_factory, sqlite_templates) -> Iterator[Gunicorn]:
    """gunicorn, 3 workers, a migrated and seeded SQLite file, the test Redis, a fresh metrics directory."""
    with running_gunicorn(
        redis_server.url, tmp_path_factory.mktemp("gunicorn"), WORKERS, sqlite_templates, stale=True
    ) as server:
        yield server


def send(server: Gunicorn, path: str, count: int, headers: dict[str, str] | None = None) -> list[tuple[int, bytes]]:
    """``count`` GETs from SENDERS threads at once, a new connection each."""
    with ThreadPoolExecutor(SENDERS) as pool:
        return list(pool.map(lambda _: server.get(path, headers), range(count)))


def test_stale_files_of_an_earlier_run_are_removed_at_start_up(gunicorn):
    assert gunicorn.stale_files, "the earlier process wrote no metric files"
    assert not set(gunicorn.stale_files) & set(os.listdir(gunicorn.metrics_dir))


def test_every_request_is_counted_exactly_once_across_the_workers(gunicorn):
    """300 requests spread over 3 workers: /metrics sums to exactly 300; a killed worker's counts stay."""
    replies = send(gunicorn, "/t/metrics/decision", N)
    assert [status for status, _ in replies] == [200] * N
    pids = {int(body.split(b'"pid": ')[1].rstrip(b"}")) for _, body in replies}
    assert len(pids) >= 2, f"every request went to one worker ({pids}): nothing was summed"
    assert gunicorn.decisions(TEST_PLAN) == N  # not N + the stale STALE_COUNT

    # A worker dies: the master's child_exit removes its live gauge; its counts remain in the total.
    victim = sorted(pids)[0]
    assert (gunicorn.metrics_dir / f"gauge_livemax_{victim}.db").exists()
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: not (gunicorn.metrics_dir / f"gauge_livemax_{victim}.db").exists(),
        15,
        "child_exit did not remove the dead worker's live gauge",
        gunicorn.log,
    )
    assert (gunicorn.metrics_dir / f"counter_{victim}.db").exists()
    wait_for(lambda: gunicorn.get("/healthz")[0] == 200, 15, "gunicorn did not recover", gunicorn.log)
    assert gunicorn.decisions(TEST_PLAN) == N


def test_the_multiprocess_exposition_passes_promtool(gunicorn):
    """It passes promtool, the decision histogram shown as a histogram (its per-bucket counters and sum, in
    the files, are not shown themselves)."""
    # Its own decision: the histogram has a series once a worker decided, whichever test ran before this one.
    assert [status for status, _ in send(gunicorn, "/t/metrics/decision", 1)] == [200]
    wait_for(lambda: b"quota_decision_seconds_bucket" in gunicorn.get("/metrics")[1], 5, "no decision shown",
             gunicorn.log)  # fmt: skip
    status, body = gunicorn.get("/metrics")
    assert status == 200
    assert b"# TYPE quota_decision_seconds histogram" in body
    assert b'quota_decision_seconds_bucket{le="+Inf",outcome="allowed"}' in body
    assert b"_batch_" not in body
    result = promtool_check(body.decode())
    assert result.returncode == 0, result.stdout + result.stderr


def test_demo_api_decisions_are_counted_exactly_once_across_the_workers(gunicorn):
    """300 requests to /api/demo/ping with the enterprise key (never refused): 300 decisions in /metrics.

    A worker counts its decisions in the shared files within METRICS_DELAY (the ledger,
    quotas/observability/ledger.py), or at once when it serves the scrape itself: the total reaches 300 and
    never passes it (tests/metrics/test_delay.py checks the delay).
    """
    before = gunicorn.decisions("enterprise")
    replies = send(gunicorn, "/api/demo/ping", N, {"X-API-Key": demo_key("enterprise")})
    assert [status for status, _ in replies] == [200] * N
    seen: list[float] = []
    wait_for(
        lambda: seen.append(gunicorn.decisions("enterprise") - before) or seen[-1] >= N,
        10,
        "the workers' decisions did not all reach /metrics",
        gunicorn.log,
    )
    assert seen[-1] == N


def test_client_kill_costs_no_worker_its_decisions_in_redis(gunicorn, redis_client):
    """CLIENT KILL TYPE normal drops every worker's held connection; the next decisions are still Redis's.

    Seen before the fix: the next request on each worker failed, the breaker
    opened, and the local fallback's own count (a share of the limit) showed.
    """
    key = demo_key("free")
    path = "/api/demo/search?q=x"  # the free plan's search scope: 10/min, counted across the workers
    assert gunicorn.remaining(path, key) == (200, "9")
    seen = []
    for _ in range(6):
        redis_client.client_kill_filter(_type="normal", skipme=True)
        seen.append(gunicorn.remaining(path, key))
    assert seen == [(200, str(n)) for n in range(8, 2, -1)]
    assert gunicorn.get("/healthz")[1].count(b'"normal"') == 1
