"""``python -m bench``: run every benchmark once, print the table, write the JSON.

All sections run in one invocation against one private redis-server, so the
figures are comparable (the bare GET baseline is measured alongside the
throttles it is compared with, the no-throttle gunicorn alongside the
throttled one). ``--quick`` takes about three minutes (the HTTP section
about 40 s of it, section 13, instructions under cachegrind, about a minute,
section 9, Redis's own capacity, about 20 s); the default run takes about
9 minutes on a 2-core machine. ``--only scale,acl`` runs just the
sections named (see :data:`SECTIONS`); ``make bench-count`` is ``--only
count``. Sections 9, 10 and 13 start redis-servers of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
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
#: Seconds a default run may take: a 100k-client memory run that would not fit is skipped.
DEFAULT_BUDGET = 290.0
#: Seconds the over-admission races take per race, roughly (forks, barrier, the race, a flush).
RACE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Profile:
    """How much of everything a run does."""

    mode: str
    rounds: int
    requests_per_round: int
    warmup: int
    decisions: int
    flood_requests: int
    memory_clients: tuple[int, ...]  # every algorithm at each size; the larger ones only if time allows
    race_trials: int
    race_max_requests: int
    race_duration: float
    http_rounds: int
    http_seconds: float
    http_warmup: float
    scale_seconds: float  # per run of section 9 (6 variants x 1 to scale_max_drivers runs)
    scale_warmup: float
    scale_max_drivers: int
    count_warmup: int  # section 13: W, the decisions both runs of a workload make under cachegrind
    count_decisions: int  # N, the decisions the second run adds


# HTTP: 3 servers x 2 streams per round; short runs, many rounds, so a burst of other work on the machine
# lands in one round's runs (the ratios are medians over rounds); about 40 s quick, 130 s default.
# Section 13: a row's figure is the same at N = 500 and N = 2,000 (within 0.05 %); W = 300, N = 1,000 took 72 to
# 94 s on 2 cores shared with other work (one valgrind start of about 15 s, then 16 runs two at a time), W = 100,
# N = 300 about 60 s (each run's first request, building the engine under valgrind, costs the same either way).
QUICK = Profile("quick", 5, 400, 200, 500, 200, (10_000,), 1, 200, 1.0, 2, 2.0, 1.0, 0.8, 0.3, 2, 100, 300)
DEFAULT = Profile(
    "default", 8, 3000, 500, 2000, 200, (10_000, 100_000), 5, 200, 1.0, 6, 3.0, 2.0, 2.5, 0.5, 3, 300, 1000
)

#: What ``--only`` accepts: the key each section's results are stored under ("commands" includes the flood).
SECTIONS = (
    "latency", "hot", "traffic", "redis_cost", "http", "traffic_http", "commands", "memory", "acl", "connections",
    "concurrency", "count", "redis_count", "scale",
)  # fmt: skip


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (about 2 minutes)")
    parser.add_argument("--out", type=Path, default=Path("bench-results.json"), help="where to write the JSON")
    parser.add_argument(
        "--only",
        type=sections,
        default=SECTIONS,
        metavar="SECTION[,SECTION]",
        help=f"run only these sections (of {', '.join(SECTIONS)})",
    )
    return parser.parse_args(argv)


def sections(text: str) -> tuple[str, ...]:
    """``--only``'s value: known section names, comma-separated."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown section {', '.join(unknown) or '(none)'}: choose from {SECTIONS}")
    return names


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
        # Other work on the machine moves every figure (the HTTP section most): say how busy it was.
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def run_all(profile: Profile, redis_url: str, started: float, only: tuple[str, ...] = SECTIONS) -> dict[str, Any]:
    """The sections in ``only`` (every one by default), in an order that keeps the timing-sensitive one first."""
    # Imported here: these modules need Django configured.
    from . import acl, concurrency, connections, redis_stats, scale

    admin = redis.Redis.from_url(redis_url)
    results: dict[str, Any] = {"machine": machine(admin), "profile": asdict(profile)}
    _timed_sections(results, profile, redis_url, admin, only)

    if "commands" in only:
        step("3. Redis commands per decision")
        admin.flushall()
        results["commands"] = redis_stats.commands_per_decision(admin, profile.decisions)
        results["flood"] = redis_stats.flood(admin, profile.flood_requests)

    if "memory" in only:
        step("4. Redis memory per client")
        race_estimate = RACE_SECONDS * profile.race_trials * len(concurrency.PEERS)  # section 5 runs later
        results["memory"] = memory_per_client(admin, profile, deadline=started + DEFAULT_BUDGET - race_estimate)

    if "acl" in only:
        step("7. allow/deny list lookup, 0 to 100,000 entries")
        results["acl"] = acl.run()

    if "connections" in only:
        step("8. one script call through each connection path")
        results["connections"] = connections.run(redis_url, 5_000 if profile.rounds < 5 else 20_000)

    if "concurrency" in only:
        step("5. over-admission, 8 processes")
        results["concurrency"] = concurrency.run(
            admin, profile.race_trials, profile.race_max_requests, profile.race_duration
        )

    if "count" in only:
        step("13. CPU instructions per decision under cachegrind, QuotaThrottle and limits")
        results["count"] = count_section(profile)

    if "redis_count" in only:
        step("14. CPU instructions per decision inside redis-server under callgrind, ours and limits, by phase")
        results["redis_count"] = redis_count_section()

    if "scale" in only:
        # Last: its own servers, and forked drivers that keep both cores busy.
        step("9. decisions per second one Redis process / a cluster of 1 and of 3 primaries sustains")
        results["scale"] = scale.run(profile.scale_max_drivers, profile.scale_seconds, profile.scale_warmup)
    admin.flushall()
    admin.close()
    return results


def _timed_sections(
    results: dict[str, Any], profile: Profile, redis_url: str, admin: redis.Redis, only: tuple[str, ...]
) -> None:
    """The sections whose figures are timings on this machine, first (before the others load Redis)."""
    from . import hot, http_load, inprocess, redis_cost, traffic, traffic_http

    if "latency" in only:
        step("1-2. in-process cost per request and bare GET")
        results["latency"] = inprocess.run(redis_url, profile.rounds, profile.requests_per_round, profile.warmup)

    if "hot" in only:
        step("11. one busy client far below its limit, in process: own cost and Redis calls per request")
        results["hot"] = hot.run(profile.rounds, profile.requests_per_round, profile.warmup)

    if "traffic" in only:
        step("12. a real API's traffic in process: 10,000 Zipf clients, three windows, each peer as its users would")
        results["traffic"] = traffic.run(redis_url, profile.rounds, profile.requests_per_round, profile.warmup)

    if "redis_cost" in only:
        step("10. Redis CPU and script time per allowed decision, beside limits, on each Redis version")
        results["redis_cost"] = redis_cost.run(max(3, profile.rounds // 2), profile.decisions * 4)

    if "http" in only:
        step(
            f"6. over HTTP through gunicorn ({http_load.loadgen.generator_name()}), QuotaThrottle, limits, no throttle"
        )
        admin.flushall()
        results["http"] = http_load.run(redis_url, profile.http_rounds, profile.http_seconds, profile.http_warmup)

    if "traffic_http" in only:
        step("12. a real API's traffic over HTTP through gunicorn: 10,000 Zipf clients, each peer as its users would")
        admin.flushall()
        results["traffic_http"] = traffic_http.run(
            redis_url, profile.http_rounds, profile.http_seconds, profile.http_warmup
        )


def redis_count_section() -> dict[str, Any]:
    """Section 14's figures (printed as a table too), or why it was skipped."""
    from . import count, redis_count

    if count.valgrind_binary() is None:
        step(f"   skipped: {count.VALGRIND_MISSING}")
        return {"skipped": count.VALGRIND_MISSING}
    result = redis_count.run()
    print(redis_count.format_table(result), flush=True)
    return result


def count_section(profile: Profile) -> dict[str, Any]:
    """Section 13's figures, or why it was skipped: it needs valgrind, which a machine may lack."""
    from . import count

    if count.valgrind_binary() is None:
        step(f"   skipped: {count.VALGRIND_MISSING}")
        return {"skipped": count.VALGRIND_MISSING}
    return count.run(profile.count_warmup, profile.count_decisions)


def memory_per_client(admin: redis.Redis, profile: Profile, *, deadline: float) -> list[dict[str, Any]]:
    """Section 4 for each client count of ``profile`` estimated to end before ``deadline`` (``time.monotonic()``);
    the first count always runs."""
    from . import redis_stats

    memory: list[dict[str, Any]] = []
    per_decision = 0.0
    for clients in profile.memory_clients:
        estimate = per_decision * clients * len(ALGORITHMS)
        if memory and time.monotonic() + estimate > deadline:
            step(f"   skipped {clients} clients per algorithm (estimated {estimate:.0f} s, over budget)")
            continue
        t0 = time.monotonic()
        for algorithm in ALGORITHMS:
            memory.append(redis_stats.memory_per_client(admin, algorithm, clients))
        per_decision = (time.monotonic() - t0) / (clients * len(ALGORITHMS))
    return memory


def step(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    profile = QUICK if args.quick else DEFAULT
    started = time.monotonic()
    # The gunicorn servers of section 6 load config.settings, which refuses to start without a key;
    # they are thrown away with the run, so a key of the run's own will do.
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as data_dir:
        server = BenchRedisServer(data_dir=Path(data_dir)).start()
        try:
            django_config.configure(server.url)
            results = run_all(profile, server.url, started, args.only)
        finally:
            from quotas.engine import default_engine

            default_engine.reset()
            server.stop()
    from .report import render

    results["timestamp"] = datetime.now(UTC).isoformat(timespec="seconds")
    results["run"] = {
        "mode": profile.mode,
        "rounds": profile.rounds,
        "requests_per_round": profile.requests_per_round,
        "seconds": round(time.monotonic() - started, 1),
        "sections": list(args.only),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(render(results))
    print(f"\nWrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
