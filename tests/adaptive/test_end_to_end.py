"""End to end: a real Celery worker and beat run the controller every second while a real gunicorn worker
reports its host's load; a CPU burner on every core makes the free plan's multiplier drop, enterprise's
less, and both recover once it stops.

The worker, beat and gunicorn use the test's own redis-server and a migrated, seeded SQLite file (whatever
DATABASE_URL says, so the subprocesses and the test share one database without a server); their settings
are ``tests/adaptive/e2e_settings.py``. Bounded: every wait has a deadline, the burner stops itself.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adaptive import store
from adaptive.controller import read_state
from adaptive.publish import read_multipliers
from config.embedded_redis import RedisServer, free_port
from tests.process_groups import stop_groups
from tests.store_client import board_of

BASE_DIR = Path(__file__).resolve().parents[2]
BURN_SECONDS = 8.0
BURNER = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(130)]


def wait_until(condition: Callable[[], object], timeout: float, every: float = 0.2) -> object:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            return value
        time.sleep(every)
    return value


@pytest.fixture
def env(tmp_path: Path, redis_server: RedisServer) -> dict[str, str]:
    """The subprocesses' environment, and their database: migrated and seeded (free, pro, enterprise)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.adaptive.e2e_settings",
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        REDIS_URL=redis_server.url,
        CELERY_BROKER_URL=redis_server.url,
        PYTHONPATH=str(BASE_DIR),
    )
    for command in (["migrate", "--noinput"], ["seed_demo"]):
        subprocess.run(
            [sys.executable, "manage.py", *command], cwd=BASE_DIR, env=env, check=True, capture_output=True, timeout=60
        )
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
    from plans.management.commands.seed_demo import demo_key

    request = urllib.request.Request(f"{base_url}/api/demo/ping", headers={"X-API-Key": demo_key("free")})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            state = response.headers["RateLimit"]
    except urllib.error.HTTPError as exc:
        state = exc.headers["RateLimit"]
    return int(re.search(r'"global-1s";r=(\d+)', state).group(1)) + 1


def test_cpu_burst_cuts_free_first_and_recovers(env, services, redis_client) -> None:
    """Free drops under a CPU burst on every core, enterprise is cut less, both return to 1.0 after it."""
    with sqlite3.connect(env["SQLITE_PATH"]) as db:
        plans = dict(db.execute("SELECT slug, id FROM quota_plans_plan"))
    free, enterprise = plans["free"], plans["enterprise"]

    # One request starts the gunicorn worker's reporter; beat and worker then publish every second.
    assert wait_until(lambda: healthy(services["base_url"]), 30), logs_of(services)
    assert wait_until(lambda: redis_client.zcard(store.hosts_key()), 10), logs_of(services)
    assert wait_until(lambda: len(read_multipliers(board_of(redis_client))) == 3, 20), logs_of(services)
    # Start from a calm machine (other jobs may share it): full capacity and CPU below the low mark.
    wait_until(
        lambda: (
            read_multipliers(board_of(redis_client)).get(free) == 1.0
            and read_state(board_of(redis_client)).get("slow", {}).get("cpu", 1) < 0.7
        ),
        20,
    )
    assert read_multipliers(board_of(redis_client))[free] == 1.0, logs_of(services)

    timeline: list[tuple[float, dict[int, float]]] = []
    started = time.monotonic()
    burners = [
        subprocess.Popen([sys.executable, "-c", BURNER.format(seconds=BURN_SECONDS)])
        for _ in range(os.cpu_count() or 2)
    ]
    limits_seen: list[int] = []  # the free key's per-second quota, as real requests see it during the burst
    try:
        while time.monotonic() - started < BURN_SECONDS + 1:
            timeline.append((time.monotonic() - started, read_multipliers(board_of(redis_client))))
            limits_seen.append(rate_limit_limit(services["base_url"]))
            time.sleep(0.25)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait(timeout=5)
    print([(round(t, 1), m[free], m[enterprise]) for t, m in timeline])
    lowest_free = min(m[free] for _, m in timeline)
    lowest_enterprise = min(m[enterprise] for _, m in timeline)
    assert lowest_free <= 0.5, f"free never dropped: {timeline}\n{logs_of(services)}"
    assert lowest_enterprise > lowest_free
    assert lowest_enterprise >= 0.8  # its floor

    full = limits_seen[0]
    assert min(limits_seen) < full, f"no request ever saw a reduced quota: {limits_seen}"

    # Recovery waits for the host's CPU to fall below the low mark: under make test another xdist worker may keep
    # a core busy for a while after the burst, so the wait is generous (alone it recovers in a few seconds).
    recovered = wait_until(
        lambda: read_multipliers(board_of(redis_client)) == {p: 1.0 for p in plans.values()}, 60, 0.25
    )
    print(f"back to 1.0 {time.monotonic() - started - BURN_SECONDS:.1f} s after the burst")
    assert recovered, f"no recovery: {read_multipliers(board_of(redis_client))} {read_state(board_of(redis_client))}"

    assert wait_until(lambda: rate_limit_limit(services["base_url"]) == full, 5), "the header never recovered"

    with sqlite3.connect(env["SQLITE_PATH"]) as db:
        reasons = [r for (r,) in db.execute("SELECT reason FROM quota_adaptive_adaptivesnapshot ORDER BY created_at")]
    assert any(r.startswith("cut: cpu") for r in reasons)
    assert any(r.startswith("recover:") for r in reasons)
