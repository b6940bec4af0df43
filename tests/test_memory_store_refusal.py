"""A production process on ``memory://`` refuses to start: gunicorn, the Celery worker and beat, each with one line.

``manage.py check`` and ``migrate`` stop on quotas.E091 (tests/test_deploy_settings.py), but gunicorn runs no
system checks and Celery's worker does not heed them: before the refusal each started, every worker counting
alone. Real processes, with DEBUG off, the project's own gunicorn config and Celery app, started at once so the
test takes the time of one start.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from config.embedded_redis import free_port
from config.run import PLAIN_HTTP
from quotas.store.opening import MEMORY_STORE_REFUSED
from tests.process_groups import stop_groups
from tests.waiting import wait_until

BASE_DIR = Path(__file__).resolve().parent.parent
#: How long a process may take to refuse, or to show it started (several start at once on two cores).
START = 40

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def production_env(tmp_path: Path, broker: str, **variables: str) -> dict[str, str]:
    """A deployment's environment on ``memory://``: DEBUG off, a throwaway run directory and database."""
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DATABASE_URL", "METRICS_TOKEN", *PLAIN_HTTP)}
    env.update(
        PLAIN_HTTP,
        REDIS_URL="memory://",
        CELERY_BROKER_URL=broker,  # with REDIS_URL memory:// the broker would be the machine's shared Redis
        RUN_DIR=str(tmp_path / "run"),
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prometheus"),
        ADAPTIVE_REPORT_INTERVAL="0",
        PYTHONUNBUFFERED="1",
        **variables,
    )
    (tmp_path / "prometheus").mkdir(exist_ok=True)
    return env


def commands(tmp_path: Path, port: int) -> dict[str, list[str]]:
    """The Procfile's web, worker and beat, as a deployment runs them."""
    celery = [sys.executable, "-m", "celery", "-A", "config"]
    return {
        "gunicorn": [
            sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
            "--bind", f"127.0.0.1:{port}", "--workers", "2", "--graceful-timeout", "2", "--no-control-socket",
        ],
        "worker": [*celery, "worker", "--pool", "solo", "-l", "info", "-n", f"refusal-{port}@%h"],
        "beat": [*celery, "beat", "-l", "debug", "--schedule", str(tmp_path / "celerybeat-schedule")],
    }  # fmt: skip


def start(tmp_path: Path, env: dict[str, str], port: int) -> dict[str, tuple[subprocess.Popen, Path]]:
    """Each process in a group of its own, its stdout and stderr in one log file."""
    started = {}
    for name, argv in commands(tmp_path, port).items():
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            started[name] = (
                subprocess.Popen(
                    argv, cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                ),
                log,
            )
    return started


def answers(port: int) -> bool:
    """Whether gunicorn serves /healthz on ``port`` (its workers loaded the application)."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False


def test_gunicorn_celery_worker_and_beat_refuse_memory_store_with_debug_off(tmp_path):
    """Each exits non-zero within START seconds, saying why in one line (quotas.E091's condition)."""
    port = free_port()
    started = start(tmp_path, production_env(tmp_path, broker="redis://127.0.0.1:1/0"), port)
    try:
        for name, (proc, log) in started.items():
            try:
                code = proc.wait(timeout=START)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{name} started on memory:// with DEBUG off\n" + log.read_text(errors="replace")[-2000:])
            said = log.read_text(errors="replace")
            assert code != 0, said[-2000:]
            assert MEMORY_STORE_REFUSED in said, f"{name}:\n{said[-2000:]}"
    finally:
        stop_groups(proc for proc, _ in started.values())


def test_with_the_setting_they_start(tmp_path, redis_server):
    """QUOTAS['ALLOW_MEMORY_STORE_IN_PRODUCTION'] (here its variable): gunicorn answers, the worker is ready, beat
    ticks."""
    port = free_port()
    env = production_env(tmp_path, broker=redis_server.url, QUOTAS_ALLOW_MEMORY_STORE_IN_PRODUCTION="true")
    started = start(tmp_path, env, port)
    logs = {name: log for name, (_, log) in started.items()}
    signs: dict[str, Callable[[], bool]] = {
        "gunicorn": lambda: answers(port),
        "worker": lambda: " ready." in logs["worker"].read_text(errors="replace"),
        "beat": lambda: "beat: Waking up" in logs["beat"].read_text(errors="replace"),
    }
    try:
        for name, started_yet in signs.items():
            proc = started[name][0]
            up = wait_until(lambda sign=started_yet, proc=proc: sign() or proc.poll() is not None, START)
            assert up, f"{name} did not start"
            assert proc.poll() is None, f"{name} exited:\n" + logs[name].read_text(errors="replace")[-2000:]
    finally:
        stop_groups(proc for proc, _ in started.values())
