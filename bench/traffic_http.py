"""Section 12, over HTTP: a real API's traffic, 10,000 API keys drawn from a Zipf distribution, through gunicorn.

Five gunicorns (2 sync workers each, the production settings, as section 6)
serve ``/api/demo/ping`` on one SQLite file and the bench Redis:

- ``no_throttle``: the baseline;
- ``quota``: QuotaThrottle, every client on the ``traffic`` plan, one limit of
  three windows (:mod:`bench.traffic_setup`);
- ``drf``, ``django_ratelimit``, ``limits``: each peer enforcing the same three
  windows as its users would (:mod:`bench.settings_traffic`).

Two streams, each sent to every server in the same order: ``zipf``, every
request with the API key of a client drawn from the Zipf sequence of
:func:`bench.traffic.zipf_clients`, and ``new_clients``, the 10,000 keys in
turn, so every decision is a cold one (the Python load generator sends a
stream's headers in turn, each of its processes from its own offset). Every client authenticates with the project's
``APIKeyAuthentication`` on every server, so they differ only by the limiter.
Every answer must be 200. Per server: req/s as a share of the baseline's (the
median over rounds of paired runs, as section 6), latency p50 and p99, and
Redis CPU per request (INFO cpu of the bench Redis around each run, which
includes the other servers' idle background work). Round trips per request
are section 12's in-process figure: a gunicorn worker's are not counted here.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import redis

from . import loadgen
from .http_load import BASE_DIR, PATH, HttpBenchError, Server, server_env, setup_database, start_server, wait_ready
from .traffic import spread, zipf_clients

CONNECTIONS = 4  # as section 6
#: name -> settings module (the peers' pick their limiter from BENCH_TRAFFIC_PEER, their name).
SERVERS = {
    "no_throttle": "bench.settings_nothrottle",
    "quota": "config.settings",
    "drf": "bench.settings_traffic",
    "django_ratelimit": "bench.settings_traffic",
    "limits": "bench.settings_traffic",
}
#: How far each round starts into a stream: more than one load process sends in a run (about 500 requests).
ROUND_STEP = 600
#: Requests in the Zipf sequence the load generator walks (more than any run sends).
SEQUENCE = 200_000


def _keys(env: dict[str, str], tmp: Path) -> list[str]:
    keys_file = tmp / "traffic-keys.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.traffic_setup", str(keys_file)],
        cwd=BASE_DIR,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode:
        raise HttpBenchError(f"bench.traffic_setup failed:\n{done.stdout}\n{done.stderr}")
    keys: list[str] = json.loads(keys_file.read_text(encoding="utf-8"))
    return keys


def _load(server: Server, headers: list[dict[str, str]], seconds: float, admin: redis.Redis) -> dict[str, Any]:
    cpu_before = _cpu(admin)
    result = loadgen.run(server.port, PATH, headers, seconds, CONNECTIONS)
    cpu = _cpu(admin) - cpu_before
    if result.errors or set(result.statuses) != {200}:
        raise HttpBenchError(f"{server.name}: expected only 200, got {result.statuses} and {result.errors} errors")
    return {**result.as_dict(), "redis_cpu_us": cpu / max(result.requests, 1) * 1e6}


def _cpu(admin: redis.Redis) -> float:
    cpu = admin.info("cpu")
    return float(cpu["used_cpu_user"] + cpu["used_cpu_sys"])


def run(redis_url: str, rounds: int, seconds: float, warmup: float) -> dict[str, Any]:
    """``rounds`` rotating runs of ``seconds`` per server after ``warmup`` seconds each; the summary."""
    sequence = zipf_clients(SEQUENCE)
    admin = redis.Redis.from_url(redis_url)
    with tempfile.TemporaryDirectory(prefix="bench-traffic-") as tmp_name:
        tmp = Path(tmp_name)
        env = server_env(tmp, redis_url)
        setup_database(env)
        keys = _keys(env, tmp)
        streams = {
            "zipf": [{"X-API-Key": keys[c]} for c in sequence],
            # Every client in turn: each request a client's first in a while (the previous one was 10,000
            # requests ago, seconds earlier), so every decision is a cold one.
            "new_clients": [{"X-API-Key": key} for key in keys],
        }
        servers = {
            name: start_server(name, {**env, "BENCH_TRAFFIC_PEER": name}, tmp, settings)
            for name, settings in SERVERS.items()
        }
        try:
            for server in servers.values():
                wait_ready(server, streams["zipf"][0])
            for server in servers.values():
                _load(server, streams["zipf"], warmup, admin)
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {s: {n: [] for n in SERVERS} for s in streams}
            order = list(SERVERS)
            for r in range(rounds):
                for stream in streams if r % 2 == 0 else list(streams)[::-1]:
                    # Each round from another place: a new client's key comes back to a server only rounds
                    # (minutes) later, once every window of its last request has passed.
                    start = r * ROUND_STEP % len(streams[stream])
                    headers = streams[stream][start:] + streams[stream][:start]
                    for name in order[r % len(order) :] + order[: r % len(order)]:
                        runs[stream][name].append(_load(servers[name], headers, seconds, admin))
        finally:
            for server in servers.values():
                server.stop()
            admin.close()
    sent = sum(r["requests"] for r in runs["zipf"]["quota"])
    return {
        "path": PATH,
        "connections": CONNECTIONS,
        "rounds": rounds,
        "seconds_per_run": seconds,
        "generator": "python",
        "traffic": spread(sequence[:sent]),
        **{stream: _summarize(by_name) for stream, by_name in runs.items()},
    }


def _summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each server's figures in one stream; its share is the median over rounds of its req/s over the
    baseline's in the same round (as section 6)."""
    out: dict[str, Any] = {}
    baseline = runs["no_throttle"]
    for name, results in runs.items():
        requests = sum(r["requests"] for r in results)
        ratios = [r["rps"] / b["rps"] for r, b in zip(results, baseline, strict=True)]
        out[name] = {
            "requests": requests,
            "rps": round(requests / sum(r["seconds"] for r in results), 1),
            "rps_share": round(statistics.median(ratios), 3),
            "median_ms": round(statistics.median(r["median_ms"] for r in results), 3),
            "p99_ms": round(statistics.median(r["p99_ms"] for r in results), 3),
            "redis_cpu_us": round(statistics.median(r["redis_cpu_us"] for r in results), 2),
        }
    return out
