"""Other processes for the usage tests: a real Celery worker, flush scripts, and request senders.

They reach the test's own Redis and the test database: PostgreSQL's test
database by URL, or, for SQLite (whose test database lives in memory), a
file copy of it made with SQLite's backup API after the test set its data up.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from django.db import connection
from django.db.models import Sum
from rest_framework.test import APIClient

from quotas.engine import default_engine
from usage.models import COUNTERS, UsageRecord

ROOT = Path(__file__).resolve().parents[2]


class WorkerDatabase:
    """The test database as seen by other processes; call :meth:`publish` once the test data exists."""

    def __init__(self, tmp_path: Path) -> None:
        self.vendor = connection.vendor
        self.sqlite_path = tmp_path / "worker.sqlite3"

    def publish(self) -> None:
        """Make the test data visible to other processes (SQLite: copy the in-memory database to a file)."""
        if self.vendor == "sqlite":
            connection.ensure_connection()
            target = sqlite3.connect(self.sqlite_path)
            try:
                connection.connection.backup(target)
            finally:
                target.close()

    def env(self) -> dict[str, str]:
        """Environment variables selecting this database in a process started with config.settings."""
        if self.vendor == "sqlite":
            return {"DATABASE_URL": "", "SQLITE_PATH": str(self.sqlite_path)}
        s = connection.settings_dict
        auth = quote(s["USER"] or "") + (":" + quote(s["PASSWORD"]) if s["PASSWORD"] else "")
        return {"DATABASE_URL": f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"}

    def totals(self) -> dict[str, Counter]:
        """Every client's usage summed over its rows, as the other processes wrote it."""
        if self.vendor != "sqlite":
            rows = UsageRecord.objects.order_by().values("client").annotate(**{c: Sum(c) for c in COUNTERS})
            return {r["client"]: Counter({c: r[c] for c in COUNTERS}) for r in rows}
        db = sqlite3.connect(self.sqlite_path, timeout=20)
        try:
            sums = ", ".join(f"SUM({c})" for c in COUNTERS)
            cursor = db.execute(f"SELECT client, {sums} FROM quota_usage_usagerecord GROUP BY client")
            return {row[0]: Counter(dict(zip(COUNTERS, row[1:], strict=True))) for row in cursor}
        finally:
            db.close()


class Database(Protocol):
    """A database other processes reach: :class:`WorkerDatabase`, or :class:`tests.usage.mariadb.MariaDB`."""

    def env(self) -> dict[str, str]: ...


def process_env(redis_url: str, database: Database, **extra: str) -> dict[str, str]:
    """The environment of a project process pointed at the test Redis and ``database``."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "REDIS_URL": redis_url, **database.env()}
    env["CELERY_BROKER_URL"] = redis_url.rsplit("/", 1)[0] + "/1"  # keep the broker's keys out of db 0
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


class CeleryWorker:
    """``celery -A config worker --pool solo`` as a child process, its log in a file."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.offset = 0  # where this worker's lines start in the shared log

    def start(self, timeout: float = 60.0) -> CeleryWorker:
        self.offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--concurrency", "1",
                   "-l", "info", "--without-gossip", "--without-mingle", "--without-heartbeat",
                   "-n", f"usage-test-{os.getpid()}-{time.monotonic_ns()}@%h"]  # fmt: skip
        self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=log, start_new_session=True)
        log.close()
        self.wait_for(lambda text: " ready." in text, timeout, "the worker to be ready")
        return self

    def log(self) -> str:
        return self.log_path.read_bytes()[self.offset :].decode("utf-8", "replace")

    def count(self, needle: str) -> int:
        return self.log().count(needle)

    def wait_for(self, condition: Callable[[str], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition(self.log()):
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"the worker exited ({self.process.returncode}) waiting for {what}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}:\n{self.log()[-3000:]}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acknowledgement, an open transaction left as it is."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def flush_script(env: dict[str, str], rounds: int) -> subprocess.Popen:
    """A process running ``flush_usage()`` ``rounds`` times in a row (batches of one key)."""
    code = (
        "import django; django.setup()\n"
        "from usage.flush import flush_usage\n"
        f"for _ in range({rounds}): flush_usage(batch_size=1)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=subprocess.PIPE)


#: Seconds a sender waits after each round of requests (see send_requests).
SENDER_PAUSE = 0.05


def send_requests(keys: dict[str, str], paths: list[str], least: int, stop, barrier, results) -> None:
    """One sender process: every key on every path, round after round, at least ``least`` rounds and then until
    ``stop`` (an Event) is set; puts (rounds, {(client, status): count}). Sending until told keeps requests in
    flight for as long as the kills and flushes they must overlap last, however fast the machine; a pause of
    :data:`SENDER_PAUSE` after each round leaves the cores to the worker and the flushes (four senders flat out
    took both cores, so the flushes they overlap took longer and the senders sent for longer)."""
    # The parent warmed the rules and API keys up, so the throttle needs no database here: a forked
    # child must not use the parent's database connections.
    api = APIClient(raise_request_exception=False)
    seen: Counter = Counter()
    barrier.wait(timeout=30)
    rounds = 0
    while rounds < least or not stop.is_set():
        for client, key in keys.items():
            for path in paths:
                seen[client, api.get(path, HTTP_X_API_KEY=key).status_code] += 1
        rounds += 1
        stop.wait(SENDER_PAUSE)
    # A worker process settles its allowances and flushes its in-process usage at exit (Runtime.at_exit);
    # multiprocessing children skip atexit. This process's poller stops first: a flush of its own under way when
    # the process exits would be cut short (the flush below found its batches taken and returned).
    runtime = default_engine.runtime()
    runtime.poller.stop()
    runtime.settle_allowances(everything=True)
    assert runtime.guard.usage.flush_usage(), "the sender's last usage did not reach Redis"
    results.put((rounds, dict(seen)))
