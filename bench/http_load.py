"""Section 6: requests per second and latency over HTTP, through gunicorn: QuotaThrottle, the best peer, no throttle.

Three gunicorns run side by side on one SQLite file and the bench Redis, with
the production settings (every middleware, metrics on) and ``config/gunicorn.py``:

- ``quota``: as ``make run`` serves (QuotaThrottle on every view);
- ``limits_swc``: ``bench.settings_limits``, the best peer instead
  (``limits``' sliding window counter on ``limits.storage.RedisStorage``, one
  counter per client, see :mod:`bench.limits_http`);
- ``no_throttle``: ``bench.settings_nothrottle`` (no throttle; nothing else differs).

Each serves ``/api/demo/ping`` to two streams (:mod:`bench.http_setup`):
``allowed``, a key whose limits no run reaches (every answer 200), and
``denied``, a key of a ``1/day`` plan, spent before timing, so both throttles
refuse every request (429; the baseline still answers 200). Every response's
status is checked. Each round loads every server with each stream, rotating
the servers' order and alternating the streams' so drift on the machine
spreads over all of them; a server's ratio is the median over rounds of its
req/s over the baseline's in the same round and stream.
"""

from __future__ import annotations

import contextlib
import http.client
import json
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
from config.run import PLAIN_HTTP

from . import loadgen

BASE_DIR = Path(__file__).resolve().parent.parent
PATH = "/api/demo/ping"
WORKERS = 2  # as `make run` (Procfile)
CONNECTIONS = 4  # two requests queued per worker: the workers never wait for the load generator

#: name -> settings module.
VARIANTS = {
    "no_throttle": "bench.settings_nothrottle",
    "quota": "config.settings",
    "limits_swc": "bench.settings_limits",
}
THROTTLED = ("quota", "limits_swc")
STREAMS = ("allowed", "denied")
#: The quota server's /metrics token (the bench reads quota_usage_write_lag_seconds from it after the load).
METRICS_TOKEN = "bench-metrics-token"
LAG_METRIC = "quota_usage_write_lag_seconds"


class HttpBenchError(RuntimeError):
    """The servers did not come up, or answered other than the stream expects (200, or 429 when denied)."""


def expected_status(name: str, stream: str) -> int:
    """What every response of server ``name`` to ``stream`` must be."""
    return 429 if stream == "denied" and name in THROTTLED else 200


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


def server_env(tmp: Path, redis_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "METRICS_TOKEN")}
    env.update(SQLITE_PATH=str(tmp / "db.sqlite3"), REDIS_URL=redis_url, DEBUG="false", PYTHONUNBUFFERED="1")
    env.update(PLAIN_HTTP)  # plain HTTP on loopback, as `make run` serves: no redirect to https://
    return env


def setup_database(env: dict[str, str]) -> dict[str, Any]:
    """Migrate and seed the bench database; return the clients :mod:`bench.http_setup` printed."""
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
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_server(name: str, env: dict[str, str], tmp: Path, settings_module: str | None = None) -> Server:
    """A gunicorn of ``config.wsgi`` named ``name``, with the settings of ``VARIANTS[name]`` unless given."""
    port = free_port()
    log = tmp / f"gunicorn-{name}.log"
    argv = [
        sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", str(WORKERS), "--graceful-timeout", "2", "--no-control-socket",
    ]  # fmt: skip
    process_env = {
        **env,
        "DJANGO_SETTINGS_MODULE": settings_module or VARIANTS[name],
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / f"prometheus-{name}"),
    }
    if name == "quota":
        process_env["METRICS_TOKEN"] = METRICS_TOKEN
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=BASE_DIR, env=process_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Server(name, port, process, log)


def wait_ready(server: Server, headers: dict[str, str], timeout: float = 60.0) -> http.client.HTTPMessage:
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


def _exhaust(server: Server, headers: dict[str, str]) -> None:
    """Spend the denied client's limit on ``server``: request until refused (its ``1/day`` lets one through)."""
    for _ in range(5):
        status, _headers = server.get(PATH, headers)
        if status == 429:
            return
        if status != 200:
            raise HttpBenchError(f"{server.name}: the denied client got {status}")
    raise HttpBenchError(f"{server.name}: the denied client was never refused")


def _load(server: Server, stream: str, headers: dict[str, str], seconds: float) -> loadgen.LoadResult:
    result = loadgen.run(server.port, PATH, headers, seconds, CONNECTIONS)
    expected = expected_status(server.name, stream)
    if result.errors or set(result.statuses) != {expected}:
        raise HttpBenchError(
            f"{server.name}, {stream} stream: expected only {expected}, got {result.statuses} "
            f"and {result.errors} socket errors"
        )
    return result


def run(redis_url: str, rounds: int, seconds: float, warmup: float) -> dict[str, Any]:
    """``rounds`` rotating runs of ``seconds`` per server and stream after ``warmup`` seconds each; the summary."""
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp_name:
        tmp = Path(tmp_name)
        env = server_env(tmp, redis_url)
        clients = setup_database(env)
        # Only bench.settings_limits reads it: the peer refuses the denied plan's clients at the same rate.
        env["BENCH_LIMITS_PLAN_RATES"] = json.dumps({str(clients["denied_plan_id"]): clients["denied_rate"]})
        headers = {stream: {"X-API-Key": clients[f"{stream}_key"]} for stream in STREAMS}
        servers = {name: start_server(name, env, tmp) for name in VARIANTS}
        try:
            seen = {name: wait_ready(server, headers["allowed"]) for name, server in servers.items()}
            # QuotaThrottle must be on exactly one server (the peer's DRF 429s carry no RateLimit headers).
            if "RateLimit" not in seen["quota"] or any("RateLimit" in seen[n] for n in VARIANTS if n != "quota"):
                raise HttpBenchError("QuotaThrottle's server sent no RateLimit header, or another server did")
            for name in THROTTLED:
                _exhaust(servers[name], headers["denied"])
            for stream in STREAMS:
                for server in servers.values():
                    _load(server, stream, headers[stream], warmup)
            runs: dict[str, dict[str, list[loadgen.LoadResult]]] = {s: {n: [] for n in VARIANTS} for s in STREAMS}
            order = list(VARIANTS)
            for r in range(rounds):
                rotated = order[r % len(order) :] + order[: r % len(order)]
                for stream in STREAMS if r % 2 == 0 else STREAMS[::-1]:
                    for name in rotated:
                        runs[stream][name].append(_load(servers[name], stream, headers[stream], seconds))
            time.sleep(2.5)  # the workers' pollers write what the last run counted in process (1 s ticks)
            lag = usage_write_lag(servers["quota"])
        finally:
            for server in servers.values():
                server.stop()
    return {**_summarize(runs, rounds, seconds), "usage_write_lag": lag}


def usage_write_lag(server: Server) -> dict[str, Any]:
    """How long usage counted in the quota server's processes (allowances' requests, refusals answered from
    memory) waited to reach Redis, over the whole section: p50 and p99 of the batches' oldest request,
    interpolated within the histogram's buckets, from a real scrape of its /metrics."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        response = conn.getresponse()
        text = response.read().decode()
    finally:
        conn.close()
    if response.status != 200:
        raise HttpBenchError(f"quota: /metrics answered {response.status}")
    return lag_quantiles(text)


def lag_quantiles(text: str) -> dict[str, Any]:
    """p50 and p99 (seconds) of :data:`LAG_METRIC` in a Prometheus text exposition, and its count."""
    cumulative: list[tuple[float, float]] = []
    for line in text.splitlines():
        if line.startswith(f"{LAG_METRIC}_bucket{{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            cumulative.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    cumulative.sort()
    count = cumulative[-1][1] if cumulative else 0.0
    return {"batches": int(count), "p50_s": _quantile(cumulative, 0.5), "p99_s": _quantile(cumulative, 0.99)}


def _quantile(cumulative: list[tuple[float, float]], q: float) -> float | None:
    """Linear interpolation within the bucket holding quantile ``q`` (as PromQL's histogram_quantile)."""
    if not cumulative or cumulative[-1][1] == 0:
        return None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for bound, seen in cumulative:
        if seen >= rank:
            if bound == float("inf"):
                return lower
            return round(lower + (bound - lower) * (rank - below) / max(seen - below, 1e-9), 3)
        lower, below = bound, seen
    return lower


def _variant(results: list[loadgen.LoadResult]) -> dict[str, Any]:
    requests = sum(r.requests for r in results)
    statuses: dict[int, int] = {}
    for r in results:
        for status, count in r.statuses.items():
            statuses[status] = statuses.get(status, 0) + count
    return {
        "requests": requests,
        "rps": round(requests / sum(r.seconds for r in results), 1),
        "median_ms": round(statistics.median(r.median_ms for r in results), 3),
        "p99_ms": round(statistics.median(r.p99_ms for r in results), 3),
        "statuses": statuses,
        "runs": [r.as_dict() for r in results],
    }


def _summarize(runs: dict[str, dict[str, list[loadgen.LoadResult]]], rounds: int, seconds: float) -> dict[str, Any]:
    """Per stream, each server's figures, its req/s ratio to the baseline's, and whether the target is met.

    ``rps_ratio`` is the median over rounds of a run's req/s over the
    baseline's run in the same round and stream: other work on the machine
    can halve one run, and a median of paired ratios shrugs that off where a
    ratio of sums does not. The target: QuotaThrottle's ratio at
    least the best peer's, in each stream.
    """
    out: dict[str, Any] = {
        "path": PATH,
        "workers": WORKERS,
        "connections": CONNECTIONS,
        "rounds": rounds,
        "seconds_per_run": seconds,
        "generator": runs["allowed"]["quota"][0].generator,
    }
    for stream, by_name in runs.items():
        baseline = by_name["no_throttle"]
        figures = {name: _variant(results) for name, results in by_name.items()}
        for name, f in figures.items():
            f["expected_status"] = expected_status(name, stream)
            ratios = [r.rps / b.rps for r, b in zip(by_name[name], baseline, strict=True)]
            f["rps_ratio"] = round(statistics.median(ratios), 3)
            f["rps_ratio_per_round"] = [round(x, 3) for x in ratios]
        out[stream] = {
            **figures,
            "meets_target": figures["quota"]["rps_ratio"] >= figures["limits_swc"]["rps_ratio"],
        }
    # The one figure of the earlier layout (quota / no throttle, the allowed stream), for readers of old results.
    out["rps_ratio"] = out["allowed"]["quota"]["rps_ratio"]
    return out
