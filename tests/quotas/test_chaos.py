"""Chaos, bounded and on loopback: redis-server killed and restarted under load through gunicorn.

Several client processes send requests to the demo API served by gunicorn
with 3 workers while the Redis it uses (with AOF, as in production) is
SIGKILLed and started again. Every response must be 2xx or 429 (never a
500), the requests admitted during the outage must stay within the workers'
local shares, and afterwards the usage API must account for every request
sent.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from config.embedded_redis import RedisServer, free_port
from demo.seed import demo_key

BASE_DIR = Path(__file__).resolve().parents[2]
WORKERS = 3
SHARE = 1 / WORKERS
CLIENTS = 4
#: Seconds of load: a second and a half before the outage and after it (it was two before and two and a half
#: after, 2 s more of the test's time for nothing it checks: only the outage's admissions and the final usage are).
LOAD_SECONDS = 5.5
OUTAGE = (1.5, 4.0)  # seconds after the load starts: kill, then restart

pytestmark = pytest.mark.slow


def _get(url: str, key: str) -> int:
    request = urllib.request.Request(url, headers={"X-API-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _load(url: str, key: str, start_at: float, results) -> None:
    """One client: requests as fast as it can until the load ends; (time since start, status) each."""
    while time.time() < start_at:
        time.sleep(0.005)
    seen = []
    while (now := time.time()) < start_at + LOAD_SECONDS:
        seen.append((now - start_at, _get(url, key)))
        time.sleep(0.01)
    results.put(seen)


def _wait(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_redis_killed_and_restarted_under_load(tmp_path, sqlite_templates):
    redis_server = RedisServer(data_dir=tmp_path / "redis", appendonly=True).start()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PROMETHEUS_MULTIPROC_DIR")}
    env.update(
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        REDIS_URL=redis_server.url,
        QUOTAS_FAILURE_MODE="local",
        QUOTAS_LOCAL_SHARE=str(SHARE),
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    sqlite_templates.copy(tmp_path / "db.sqlite3", env, seeded=True)
    port = free_port()
    log = (tmp_path / "gunicorn.log").open("w")  # a file, not a pipe nobody reads (it would fill and block)
    gunicorn = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(WORKERS), "--graceful-timeout", "3", "--log-level", "warning"],
        cwd=BASE_DIR, env=env, start_new_session=True, stderr=log, stdout=log,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    key = demo_key("pro")  # 50/s, 1000/min: the outage shares bind, not the normal limits
    try:
        _wait(lambda: _healthy(base), 30)
        ctx = multiprocessing.get_context("fork")
        results = ctx.Queue()
        start_at = time.time() + 0.5
        clients = [ctx.Process(target=_load, args=(f"{base}/api/demo/ping", key, start_at, results))
                   for _ in range(CLIENTS)]  # fmt: skip
        for c in clients:
            c.start()
        time.sleep(max(0.0, start_at + OUTAGE[0] - time.time()))
        redis_server.stop(kill=True)
        time.sleep(max(0.0, start_at + OUTAGE[1] - time.time()))
        redis_server.start()
        seen = [row for _ in clients for row in results.get(timeout=60)]
        for c in clients:
            c.join(timeout=10)
        statuses = Counter(status for _, status in seen)
        assert set(statuses) <= {200, 429}, f"unexpected statuses: {statuses}"

        # During the outage each worker admits at most its share: 50/s x 1/3 = 16 per second each.
        down = [s for t, s in seen if OUTAGE[0] + 0.2 < t < OUTAGE[1] - 0.2]
        outage_seconds = OUTAGE[1] - OUTAGE[0] - 0.4
        per_worker_per_second = int(50 * SHARE)
        allowed_bound = WORKERS * per_worker_per_second * (outage_seconds + 1)
        assert down.count(200) <= allowed_bound, (down.count(200), allowed_bound)

        # Usage reconciles: every request sent is counted, once (buffers flush within a second).
        def counted() -> int:
            request = urllib.request.Request(f"{base}/api/v1/usage/?group_by=day", headers={"X-API-Key": key})
            with urllib.request.urlopen(request, timeout=5) as response:
                body = json.loads(response.read())
            totals = body["totals"]
            return totals["allowed"] + totals["denied"]  # shadow would-denies were admitted: among allowed

        deadline = time.monotonic() + 10
        while counted() != len(seen) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert counted() == len(seen)
    finally:
        os.killpg(gunicorn.pid, signal.SIGTERM)
        try:
            gunicorn.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(gunicorn.pid, signal.SIGKILL)
        redis_server.stop()
        log.close()
        text = (tmp_path / "gunicorn.log").read_text()
        assert "Internal Server Error" not in text, text[text.find("Internal Server Error") :][:3000]
