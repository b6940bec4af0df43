"""End to end: a real Celery worker and beat run the controller twice a second on the load samples every host
publishes, and a real gunicorn worker applies the multipliers; a burst of CPU on every host makes the free plan's
multiplier drop, enterprise's less, and both recover once the hosts are calm again.

The hosts are the test's own: it publishes their samples to Redis through the reporters' path
(:func:`adaptive.reporter.publish_sample`), as every web process does once a second, and the processes report
none of their own. So the test decides what load the controller sees, and another job busy on the machine
cannot change it (the reporter's own reading of the CPU is tested in test_reporter.py).

The worker, beat and gunicorn use the test's own redis-server and a migrated, seeded SQLite file (whatever
DATABASE_URL says, so the subprocesses and the test share one database without a server); their settings
are ``tests/adaptive/e2e_settings.py``. Bounded: every wait has a deadline and ends as soon as it is met.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptive.controller import read_state
from adaptive.publish import read_multipliers
from adaptive.reporter import publish_sample
from config.embedded_redis import RedisServer, free_port
from quotas.internal_api import ControllerBoard
from tests.process_groups import stop_groups
from tests.sqlite_template import SqliteTemplates
from tests.store_client import board_of
from tests.waiting import wait_until

BASE_DIR = Path(__file__).resolve().parents[2]
#: The hosts of the test's fleet, and the CPU they report: calm (below the low mark, 0.7), then a burst (above
#: high, 0.9, below critical, 0.97: the controller cuts by half at most every DECREASE_COOLDOWN).
HOSTS = ("web-1", "web-2")
CALM, BURST = 0.2, 0.95

pytestmark = [pytest.mark.slow, pytest.mark.timeout(130)]


class Fleet:
    """The fleet's reporters: a thread publishing every host's sample four times a second (a reporter's interval
    is one second, its samples live SAMPLE_TTL = 5 s; the controller runs twice a second) at the CPU the test sets
    in :attr:`cpu`."""

    def __init__(self, board: ControllerBoard, cpu: float) -> None:
        self.board, self.cpu = board, cpu
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test-fleet", daemon=True)

    def _run(self) -> None:
        while True:
            for pid, host in enumerate(HOSTS, start=1):
                sample = {"host": host, "pid": pid, "at": time.time(), "cpu": self.cpu, "memory": 0.5, "db": None}
                publish_sample(self.board, sample, ttl=5.0)
            if self._stop.wait(0.25):
                return

    def __enter__(self) -> Fleet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture
def env(tmp_path: Path, redis_server: RedisServer, sqlite_templates: SqliteTemplates) -> dict[str, str]:
    """The subprocesses' environment, and their database: migrated and seeded (free, pro, enterprise)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.adaptive.e2e_settings",
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        REDIS_URL=redis_server.url,
        CELERY_BROKER_URL=redis_server.url,
        PYTHONPATH=str(BASE_DIR),
    )
    sqlite_templates.copy(tmp_path / "db.sqlite3", env, seeded=True)
    return env


@pytest.fixture
def services(env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, object]]:
    """Celery worker, Celery beat and one gunicorn worker, each in a session of its own, stopped afterwards."""
    port = free_port()
    commands = {
        "worker": ["-m", "celery", "-A", "config", "worker", "--pool", "solo", "-l", "info",
                   "--without-gossip", "--without-mingle", "--without-heartbeat"],
        "beat": ["-m", "celery", "-A", "config", "beat", "-l", "info", "-s", str(tmp_path / "schedule")],
        "web": ["-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                "--no-control-socket"],
    }  # fmt: skip
    procs: dict[str, subprocess.Popen] = {}
    logs = {name: tmp_path / f"{name}.log" for name in commands}
    try:
        for name, args in commands.items():
            with logs[name].open("wb") as out:
                procs[name] = subprocess.Popen(
                    [sys.executable, *args], cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
        yield {"base_url": f"http://127.0.0.1:{port}", "procs": procs, "logs": logs}
    finally:
        stop_groups(procs.values())


def logs_of(services: dict) -> str:
    return "\n".join(f"--- {n}\n{p.read_text(errors='replace')[-3000:]}" for n, p in services["logs"].items())


def healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def rate_limit_limit(base_url: str) -> int:
    """The free plan's per-second quota in force as a real request with the free demo key sees it.

    RateLimit-Policy keeps the full quota under a multiplier (the draft asks a policy to stay
    stable); the reduction shows in RateLimit's ``r``. The key spends one token every 0.25 s or
    more and the 10/s bucket refills fully in between, so ``r`` + 1 is the quota in force.
    """
    from demo.seed import demo_key

    request = urllib.request.Request(f"{base_url}/api/demo/ping", headers={"X-API-Key": demo_key("free")})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            state = response.headers["RateLimit"]
    except urllib.error.HTTPError as exc:
        state = exc.headers["RateLimit"]
    return int(re.search(r'"global-1s";r=(\d+)', state).group(1)) + 1


def test_cpu_burst_cuts_free_first_and_recovers(env, services, redis_client) -> None:
    """Every host at 95 % CPU: free drops first and furthest, enterprise is cut less and never below its floor,
    and real requests see the reduced quota; the hosts calm again, both return to 1.0, and so does the quota."""
    with sqlite3.connect(env["SQLITE_PATH"]) as db:
        plans = dict(db.execute("SELECT slug, id FROM quota_plans_plan"))
    free, enterprise = plans["free"], plans["enterprise"]
    board = board_of(redis_client)

    with Fleet(board, CALM) as fleet:
        assert wait_until(lambda: healthy(services["base_url"]), 30, 0.2), logs_of(services)
        # A run of the controller has read the hosts' samples and published a multiplier for every plan.
        assert wait_until(
            lambda: "cpu" in read_state(board).get("fast", {}) and len(read_multipliers(board)) == 3, 30, 0.2
        ), logs_of(services)
        assert read_multipliers(board) == {p: 1.0 for p in plans.values()}, logs_of(services)
        full = rate_limit_limit(services["base_url"])

        fleet.cpu = BURST
        timeline: list[dict[int, float]] = []  # the published multipliers, as the test saw them
        limits_seen: list[int] = []  # the free key's per-second quota, as real requests see it

        def cut_deep_and_seen() -> bool:
            timeline.append(read_multipliers(board))
            limits_seen.append(rate_limit_limit(services["base_url"]))
            return timeline[-1][free] <= 0.5 and limits_seen[-1] < full

        assert wait_until(cut_deep_and_seen, 30, 0.25), f"{timeline}\n{limits_seen}\n{logs_of(services)}"
        cut = [m for m in timeline if m[free] < 1.0]
        assert all(m[enterprise] >= m[free] for m in cut), timeline  # free is cut first, and further
        assert min(m[enterprise] for m in cut) > min(m[free] for m in cut)
        assert min(m[enterprise] for m in cut) >= 0.8, timeline  # its floor

        fleet.cpu = CALM
        recovered = wait_until(lambda: read_multipliers(board) == {p: 1.0 for p in plans.values()}, 30, 0.25)
        assert recovered, f"no recovery: {read_multipliers(board)} {read_state(board)}"
        assert wait_until(lambda: rate_limit_limit(services["base_url"]) == full, 5, 0.25), "the quota never recovered"

    with sqlite3.connect(env["SQLITE_PATH"]) as db:
        reasons = [r for (r,) in db.execute("SELECT reason FROM quota_adaptive_adaptivesnapshot ORDER BY created_at")]
    assert any(r.startswith("cut: cpu 0.9") for r in reasons), reasons
    assert any(r.startswith("recover:") for r in reasons), reasons
