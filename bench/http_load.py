"""Section 6: requests per second and latency over HTTP, through gunicorn, with and without QuotaThrottle.

Two gunicorns run side by side on one SQLite file and the bench Redis, with
the production settings and ``config/gunicorn.py``: one as ``make run`` serves
(QuotaThrottle on every view), one with ``bench.settings_nothrottle`` (no
throttle; nothing else differs). Both serve ``/api/demo/ping`` to a key of a
``bench`` plan shaped like the demo plans, with limits no run reaches. Each
round loads one server then the other, alternating which goes first, so drift
on the machine spreads over both; the ratio compares the sums.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.embedded_redis import free_port

from . import loadgen

BASE_DIR = Path(__file__).resolve().parent.parent
PATH = "/api/demo/ping"
WORKERS = 2  # as `make run` (Procfile)
CONNECTIONS = 4  # two requests queued per worker: the workers never wait for the load generator

#: name -> settings module.
VARIANTS = {"no_throttle": "bench.settings_nothrottle", "quota": "config.settings"}


class HttpBenchError(RuntimeError):
    """The servers did not come up, or answered something other than 200."""


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen
    log: Path

    def get(self, path: str, headers: dict[str, str]) -> tuple[int, http.client.HTTPMessage]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            return response.status, response.headers
        finally:
            conn.close()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def _env(tmp: Path, redis_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "METRICS_TOKEN")}
    env.update(SQLITE_PATH=str(tmp / "db.sqlite3"), REDIS_URL=redis_url, DEBUG="false", PYTHONUNBUFFERED="1")
    return env


def _setup_database(env: dict[str, str]) -> str:
    """Migrate and seed the bench database; return the bench plan's API key."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.http_setup"],
        cwd=BASE_DIR,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode:
        raise HttpBenchError(f"bench.http_setup failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def _start(name: str, env: dict[str, str], tmp: Path) -> Server:
    port = free_port()
    log = tmp / f"gunicorn-{name}.log"
    argv = [
        sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", str(WORKERS), "--graceful-timeout", "2", "--no-control-socket",
    ]  # fmt: skip
    server_env = {
        **env,
        "DJANGO_SETTINGS_MODULE": VARIANTS[name],
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / f"prometheus-{name}"),
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=BASE_DIR, env=server_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Server(name, port, process, log)


def _wait_ready(server: Server, headers: dict[str, str], timeout: float = 60.0) -> http.client.HTTPMessage:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            status, response_headers = server.get(PATH, headers)
            if status == 200:
                return response_headers
            raise HttpBenchError(f"{server.name}: {PATH} answered {status}")
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise HttpBenchError(f"{server.name} did not come up:\n" + server.log.read_text(errors="replace")[-3000:])
        time.sleep(0.2)


def _load(server: Server, headers: dict[str, str], seconds: float) -> loadgen.LoadResult:
    result = loadgen.run(server.port, PATH, headers, seconds, CONNECTIONS)
    if result.non_2xx or result.errors:
        raise HttpBenchError(f"{server.name}: {result.non_2xx} non-2xx responses, {result.errors} socket errors")
    return result


def run(redis_url: str, rounds: int, seconds: float, warmup: float) -> dict[str, Any]:
    """``rounds`` alternating runs of ``seconds`` per server after ``warmup`` seconds each; the summary."""
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp_name:
        tmp = Path(tmp_name)
        env = _env(tmp, redis_url)
        headers = {"X-API-Key": _setup_database(env)}
        servers = {name: _start(name, env, tmp) for name in VARIANTS}
        try:
            seen = {name: _wait_ready(server, headers) for name, server in servers.items()}
            # The comparison means something only if exactly one of them throttles.
            if "RateLimit" not in seen["quota"] or "RateLimit" in seen["no_throttle"]:
                raise HttpBenchError("the throttled server sent no RateLimit header, or the other one did")
            for server in servers.values():
                _load(server, headers, warmup)
            runs: dict[str, list[loadgen.LoadResult]] = {name: [] for name in VARIANTS}
            order = list(VARIANTS)
            for r in range(rounds):
                for name in order if r % 2 == 0 else order[::-1]:
                    runs[name].append(_load(servers[name], headers, seconds))
        finally:
            for server in servers.values():
                server.stop()
    return _summarize(runs, seconds)


def _summarize(runs: dict[str, list[loadgen.LoadResult]], seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": PATH,
        "workers": WORKERS,
        "connections": CONNECTIONS,
        "seconds_per_run": seconds,
        "generator": runs["quota"][0].generator,
    }
    for name, results in runs.items():
        requests = sum(r.requests for r in results)
        out[name] = {
            "requests": requests,
            "rps": round(requests / sum(r.seconds for r in results), 1),
            "median_ms": round(statistics.median(r.median_ms for r in results), 3),
            "p99_ms": round(statistics.median(r.p99_ms for r in results), 3),
            "runs": [r.as_dict() for r in results],
        }
    out["rps_ratio"] = round(out["quota"]["rps"] / out["no_throttle"]["rps"], 3)
    return out
