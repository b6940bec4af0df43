"""The program ``make bench-count`` runs under cachegrind.

``python -m bench.count_workload --warmup W --decisions N --redis-url URL [--redis-url URL2] WORKLOAD...``
configures Django as the in-process sections do (:mod:`bench.django_config`),
imports everything a request needs, then forks two children per workload: one
sends W requests, the other W + N, through the workload's DRF view
(``APIRequestFactory`` and ``view(request)``, behind ``QuotaHeadersMiddleware``),
each on a private Redis of its own (one per ``--redis-url``, so as many children
run at once as URLs are given). Each child prints one JSON line and exits.

Why children: valgrind makes Python's start and Django's setup take about 15 s,
and a forked child's count starts from its parent's at the fork, so both
children of a workload carry the same setup, paid once, and the difference of
their totals is exactly N decisions (:mod:`bench.count`). The parent does only
a loop step between two forks, which the later child counts too: a few thousand
instructions, a few per decision.

Each child empties its Redis first and reads Redis's script calls after its W
requests and at its end, so both children do the same work apart from the N
requests, and the W + N child reports the script calls those N requests made.
Nothing is timed. Run without valgrind it is an ordinary program, which is how
the tests check it.

The engine's clocks (:data:`COUNTED_QUOTAS`): valgrind runs Python about 50
times slower, while the engine's background work and its local allowances go
by the clock. Left alone, the poller would tick 50 times as often per request
as at full speed, each tick's fixed cost (a few round trips) landing on a
handful of requests, and more ticks in the longer child than in the shorter;
so the poller does not tick during a run: each child ticks once after its
W warm-up requests and once at its end, when the background work its last
requests left (usage of requests its allowances
admitted, keys' last use, the history, allowances to give back) is counted,
and the tick's fixed cost cancels between the two children, as it nearly
vanishes over the thousands of requests a second between two ticks at full
speed. An allowance lasts 1 s instead of 0.25 s, so that at valgrind's pace
(about 120 requests a second) it holds ``MAX_REQUESTS`` (50) requests, as it
does at full speed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, NoReturn

import redis
from django.conf import settings

from . import django_config


@dataclass(frozen=True, slots=True)
class Workload:
    """One row of the count: a view of :mod:`bench.views` (named, as it needs Django configured), its path,
    and whether one user sends every request (busy) or each request has a new user (cold)."""

    view: str
    path: str
    busy: bool


WORKLOADS: dict[str, Workload] = {
    "no_throttle": Workload("TinyView", "/tiny/", busy=False),
    "limits_1": Workload("LimitsSlidingWindowView", "/limits-swc/", busy=False),
    "limits_5": Workload("LimitsFiveWindowsView", "/limits-five/", busy=False),
    "quota_1": Workload("OneLimitView", "/one/", busy=False),
    "quota_5": Workload("FiveLimitsView", "/five/", busy=False),
    "limits_busy": Workload("LimitsSlidingWindowView", "/limits-swc/", busy=True),
    "quota_1_busy": Workload("OneLimitView", "/one/", busy=True),
    "quota_5_busy": Workload("FiveLimitsView", "/five/", busy=True),
}
#: The busy client's user id; cold users count up from 1, far below it.
BUSY_USER_PK = 900_000_000
#: The engine's settings in a counted run (see the module's docstring): no tick of the poller within a run,
#: allowances long enough to fill at valgrind's pace.
COUNTED_QUOTAS: dict[str, Any] = {"RULES_CHECK_INTERVAL": 3600.0, "ALLOWANCES": {"HORIZON": 1.0}}
#: How Redis receives a script: a decision, a ``limits`` hit, the engine's background writes.
SCRIPT_CALLS = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall", "cmdstat_fcall_ro")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.count_workload", description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="+", choices=WORKLOADS, metavar="WORKLOAD")
    parser.add_argument("--warmup", type=int, required=True, help="W: requests both children send")
    parser.add_argument("--decisions", type=int, required=True, help="N: requests the second child adds")
    parser.add_argument(
        "--redis-url", action="append", required=True, help="a private redis-server, one per child running at once"
    )
    return parser.parse_args(argv)


def script_calls(admin: redis.Redis) -> int:
    """The script calls Redis has received since its stats were last reset."""
    stats = admin.info("commandstats")
    return sum(int(stats.get(name, {}).get("calls", 0)) for name in SCRIPT_CALLS)


def send(view: Any, workload: Workload, count: int, first: int) -> int:
    """Send ``count`` requests through ``view``, cold users numbered from ``first``; how many were not 200."""
    from .views import BenchUser, make_request

    failed = 0
    for i in range(first, first + count):
        user = BenchUser(pk=BUSY_USER_PK if workload.busy else i + 1)
        failed += view(make_request(workload.path, user)).status_code != 200
    return failed


def child(name: str, warmup: int, total: int, redis_url: str) -> NoReturn:
    """One run of ``name``: ``total`` requests on ``redis_url``; prints its JSON line and exits the process."""
    from quotas.engine import default_engine
    from quotas.middleware import QuotaHeadersMiddleware

    from . import views

    code = 1
    try:
        # Read at call time: the engine is built by the first request, after this.
        settings.QUOTAS = {**settings.QUOTAS, "REDIS_URL": redis_url}
        admin = redis.Redis.from_url(redis_url)
        admin.flushall()
        admin.config_resetstat()
        workload = WORKLOADS[name]
        view = QuotaHeadersMiddleware(getattr(views, workload.view).as_view())
        failed = send(view, workload, warmup, 0)
        # The warm-up's background work done first, so the tick at the end does the last N requests' only (in both
        # children alike: the shorter one's finds nothing left); its script calls (the history's) count with them.
        default_engine.runtime().tick()
        before = script_calls(admin)
        failed += send(view, workload, total - warmup, warmup)
        default_engine.runtime().tick()  # the background work this run's requests left (see the module's docstring)
        calls = script_calls(admin) - before
        default_engine.reset()  # the poller stops, in every child alike
        line = {"workload": name, "decisions": total, "pid": os.getpid(), "script_calls": calls, "failed": failed}
        print(json.dumps(line), flush=True)
        code = 1 if failed else 0
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        # Not through Python's exit: the parent's atexit handlers are not this child's to run.
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    django_config.configure(args.redis_url[0])
    settings.QUOTAS = {**settings.QUOTAS, **COUNTED_QUOTAS}
    # Imported before forking, once for every child (valgrind makes imports slow): everything a request needs,
    # and no thread or socket yet.
    from quotas.middleware import QuotaHeadersMiddleware  # noqa: F401

    from . import views  # noqa: F401

    runs = [(name, total) for name in args.workloads for total in (args.warmup + args.decisions, args.warmup)]
    free: list[str] = list(args.redis_url)  # the Redis of each lane no child is using
    running: dict[int, str] = {}  # child pid -> its Redis
    failed = 0
    for name, total in runs:
        if not free:
            pid, status = os.wait()
            free.append(running.pop(pid))
            failed += status != 0
        url = free.pop()
        pid = os.fork()
        if pid == 0:
            child(name, args.warmup, total, url)
        running[pid] = url
    while running:
        pid, status = os.wait()
        running.pop(pid)
        failed += status != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
