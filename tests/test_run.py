"""End to end: ``python -m config.run`` serves the demo API on its own embedded Redis, and SIGINT stops it all.

This is what ``make run`` does after ``migrate`` and ``seed_demo``, against a throwaway SQLite file and run
directory. Ctrl-C is a SIGINT to the foreground process group, which is what the test sends. honcho puts each
child in a session of its own, so "nothing left behind" is checked over every process seen while running (and
anything else in their sessions), not only over the group that got the signal.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import psutil
import pytest

from config.embedded_redis import free_port
from config.run import PLAIN_HTTP
from config.secret_key import read_key
from demo.seed import demo_key
from tests.sqlite_template import SqliteTemplates

BASE_DIR = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def get(url: str, api_key: str | None = None) -> tuple[int, Message]:
    """Status and headers of a GET, 4xx/5xx included."""
    request = urllib.request.Request(url, headers={"X-API-Key": api_key} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers


def healthy(base: str) -> bool:
    try:
        return get(f"{base}/healthz")[0] == 200
    except OSError:  # not listening yet
        return False


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def process_tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def describe(procs: list[psutil.Process]) -> list[str]:
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):  # it may exit while we look
            out.append(f"{proc.pid} {' '.join(proc.cmdline())}")
    return out


def has_every_service(procs: list[psutil.Process]) -> bool:
    lines = describe(procs)
    return (
        sum("gunicorn" in line for line in lines) >= 3  # master + 2 workers
        and sum("celery" in line and " worker " in line for line in lines) >= 2  # master + pool child
        and any("celery" in line and " beat " in line for line in lines)
        and any("redis-server" in line for line in lines)
    )


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def survivors(seen: list[psutil.Process], sessions: set[int]) -> list[psutil.Process]:
    """Processes seen while running that still run, plus any process in one of their sessions (a late fork)."""
    left = [p for p in seen if alive(p)]
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) in sessions and proc not in left and alive(proc):
                left.append(proc)
        except (ProcessLookupError, PermissionError):
            pass
    return left


@dataclass
class Platform:
    process: subprocess.Popen
    base_url: str
    run_dir: Path
    seen: list[psutil.Process]


@pytest.fixture
def run_env(tmp_path: Path, sqlite_templates: SqliteTemplates) -> dict[str, str]:
    """config.run's environment as `make run` builds it on a fresh checkout.

    A free PORT, no REDIS_URL (so Redis is embedded), no SECRET_KEY (so the run
    directory's generated key is used by every command), none of the HTTPS switches
    the test session sets (config.run must turn them off itself), a migrated and seeded SQLite.
    """
    unset = ("REDIS_URL", "CELERY_BROKER_URL", "DATABASE_URL", "SECRET_KEY", *PLAIN_HTTP)
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(PORT=str(free_port()), SQLITE_PATH=str(tmp_path / "db.sqlite3"), RUN_DIR=str(tmp_path / "run"))
    run = functools.partial(subprocess.run, cwd=BASE_DIR, env=env, check=True, capture_output=True, timeout=60)
    run([sys.executable, "-m", "config.secret_key"])
    sqlite_templates.copy(tmp_path / "db.sqlite3", env, seeded=False)  # as `manage.py migrate` leaves it
    # Seeded here, not in the template: the demo keys derive from the key config.secret_key made for this run.
    run([sys.executable, "manage.py", "seed_demo"])
    return env


def run_dir_demo_key(run_dir: Path, slug: str) -> str:
    """The demo key ``make run`` printed: derived from the run directory's generated secret key."""
    from django.test import override_settings

    with override_settings(SECRET_KEY=read_key(run_dir)):
        return demo_key(slug)


@pytest.fixture
def platform(run_env: dict[str, str], tmp_path: Path) -> Iterator[Platform]:
    """``python -m config.run`` in a session of its own, up and answering; anything it leaves behind is killed."""
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "config.run"],
            cwd=BASE_DIR,
            env=run_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Platform(proc, f"http://127.0.0.1:{run_env['PORT']}", Path(run_env["RUN_DIR"]), [])
    try:
        ready = wait_until(lambda: healthy(running.base_url), 60) and wait_until(
            lambda: has_every_service(process_tree(proc.pid)), 20
        )
        running.seen = process_tree(proc.pid)
        if not ready:
            pytest.fail("config.run did not come up within the time limit:\n" + log.read_text(errors="replace"))
        yield running
    finally:
        # Reap by the snapshot: orphans of a failed shutdown are no longer descendants of proc.
        for child in [*running.seen, *process_tree(proc.pid)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        proc.wait(timeout=10)


def test_run_serves_the_demo_api_and_sigint_stops_every_process(platform: Platform) -> None:
    """The banner states the free plan's seeded limits; the demo API answers with RateLimit headers and a burst
    is refused; Ctrl-C stops every process and config.run exits 0."""
    banner = (platform.run_dir.parent / "run.log").read_text()
    assert "free plan's limits (10/s overall, 10/min on search)" in banner
    status, headers = get(f"{platform.base_url}/api/demo/ping", run_dir_demo_key(platform.run_dir, "free"))
    assert status == 200
    assert headers["RateLimit"]
    assert headers["RateLimit-Policy"]

    for _ in range(30):
        status, headers = get(f"{platform.base_url}/api/demo/search?q=x", run_dir_demo_key(platform.run_dir, "free"))
        if status == 429:
            break
    assert status == 429, "a burst on the free plan was never throttled"
    assert int(headers["Retry-After"]) >= 1
    assert any((platform.run_dir / "redis").iterdir()), "the embedded Redis wrote no AOF"

    sessions = {os.getsid(p.pid) for p in platform.seen if alive(p)}
    os.killpg(platform.process.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
    assert platform.process.wait(timeout=20) == 0  # a stop asked for: `make run` reports no "Error 130"
    wait_until(lambda: not survivors(platform.seen, sessions), 10)
    assert describe(survivors(platform.seen, sessions)) == []
