"""``python -m bench``: run every benchmark once, print the table, write the JSON.

All sections run in one invocation against one private redis-server, so the
figures are comparable (the bare GET baseline is measured alongside the
throttles it is compared with). ``--quick`` takes well under 30 s; the
default run stays within about 3 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import redis
from django import get_version
from redis.utils import HIREDIS_AVAILABLE
from rest_framework import VERSION as drf_version

from . import django_config
from .server import BenchRedisServer

ALGORITHMS = ("fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket")
#: Seconds the default run may spend before it skips the optional 100k-client memory run.
DEFAULT_BUDGET = 170.0


@dataclass(frozen=True, slots=True)
class Profile:
    """How much of everything a run does."""

    mode: str
    rounds: int
    requests_per_round: int
    warmup: int
    decisions: int
    flood_requests: int
    memory_clients: int
    big_memory_clients: int  # token_bucket only, if time allows; 0 skips it
    race_trials: int
    race_max_requests: int
    race_duration: float


QUICK = Profile("quick", 5, 400, 200, 500, 200, 10_000, 0, 1, 200, 1.0)
DEFAULT = Profile("default", 10, 4000, 500, 2000, 200, 10_000, 100_000, 5, 200, 1.0)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (under 30 s)")
    parser.add_argument("--out", type=Path, default=Path("bench-results.json"), help="where to write the JSON")
    return parser.parse_args(argv)


def machine(admin: redis.Redis) -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "redis_server": admin.info("server")["redis_version"],
        "redis_py": redis.__version__,
        "hiredis": metadata.version("hiredis") if HIREDIS_AVAILABLE else "not used",
        "django": get_version(),
        "drf": drf_version,
    }


def run_all(profile: Profile, redis_url: str, started: float) -> dict[str, Any]:
    """Every section, in an order that keeps the timing-sensitive one first."""
    # Imported here: these modules need Django configured.
    from . import concurrency, inprocess, redis_stats

    admin = redis.Redis.from_url(redis_url)
    results: dict[str, Any] = {"machine": machine(admin), "profile": asdict(profile)}

    step("1-2. in-process cost per request and bare GET")
    results["latency"] = inprocess.run(redis_url, profile.rounds, profile.requests_per_round, profile.warmup)

    step("3. Redis commands per decision")
    admin.flushall()
    results["commands"] = redis_stats.commands_per_decision(admin, profile.decisions)
    results["flood"] = redis_stats.flood(admin, profile.flood_requests)

    step("4. Redis memory per client")
    memory, tb_seconds = [], 0.0
    for algorithm in ALGORITHMS:
        t0 = time.monotonic()
        memory.append(redis_stats.memory_per_client(admin, algorithm, profile.memory_clients))
        if algorithm == "token_bucket":
            tb_seconds = time.monotonic() - t0
    big = profile.big_memory_clients
    # The race below takes ~15 s; run the big one only if it fits the budget.
    estimate = tb_seconds * big / profile.memory_clients
    if big and time.monotonic() - started + estimate + 15 <= DEFAULT_BUDGET:
        memory.append(redis_stats.memory_per_client(admin, "token_bucket", big))
    elif big:
        step(f"   skipped {big} token_bucket clients (estimated {estimate:.0f} s, over budget)")
    results["memory"] = memory

    step("5. over-admission, 8 processes")
    results["concurrency"] = concurrency.run(
        admin, profile.race_trials, profile.race_max_requests, profile.race_duration
    )
    admin.flushall()
    admin.close()
    return results


def step(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    profile = QUICK if args.quick else DEFAULT
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as data_dir:
        server = BenchRedisServer(data_dir=Path(data_dir)).start()
        try:
            django_config.configure(server.url)
            results = run_all(profile, server.url, started)
        finally:
            from quotas.engine import reset_engine

            reset_engine()
            server.stop()
    from .report import render

    results["timestamp"] = datetime.now(UTC).isoformat(timespec="seconds")
    results["run"] = {
        "mode": profile.mode,
        "rounds": profile.rounds,
        "requests_per_round": profile.requests_per_round,
        "seconds": round(time.monotonic() - started, 1),
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(render(results))
    print(f"\nWrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
