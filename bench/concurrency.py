"""Section 5: over-admission when 8 processes race one client's limit.

Each peer is started as 8 forked processes that wait on a barrier, then send
requests for one client as fast as they can, for at most ``duration`` seconds
or ``max_requests`` requests each. A correct limiter admits exactly the limit
(plus, for a token bucket, what refills during the race); a check-then-set
limiter admits more, because processes read the same count before any of
them writes it back.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from quotas.contract.keys import client_tag
from quotas.engine import default_engine
from quotas.exceptions import StoreUnavailable
from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
from quotas.runtime import build_runtime
from quotas.store.decision import DecideCall

from .clock import avoid_window_edge
from .peers import ratelimit_window_offset
from .views import (
    BenchUser,
    DrfRaceView,
    LimitsMovingWindowRaceView,
    LimitsSlidingWindowRaceView,
    RatelimitRaceView,
    make_request,
)

PROCESSES = 8
RATE = "100/min"
RACE_USER_PK = 4 * 10**9


@dataclass(frozen=True, slots=True)
class WorkerResult:
    admitted: int
    denied: int
    errors: int
    started: float  # time.time() when the barrier released this worker
    finished: float


Worker = Callable[[Any, Any, str, int, float], None]


def _fire(send: Callable[[], bool | None], barrier: Any, out: Any, max_requests: int, duration: float) -> None:
    """Send until the budget is spent; ``send`` says admitted (True), denied (False) or failed (None)."""
    barrier.wait()
    started = time.time()
    deadline = time.perf_counter() + duration
    admitted = denied = errors = sent = 0
    while sent < max_requests and time.perf_counter() < deadline:
        sent += 1
        outcome = send()
        if outcome is None:
            errors += 1
        elif outcome:
            admitted += 1
        else:
            denied += 1
    out.put(WorkerResult(admitted, denied, errors, started, time.time()))


#: Suffix of an algorithm raced with local allowances on (QUOTAS['ALLOWANCES'] at its defaults).
ALLOWANCES = "+allowances"


def quota_worker(barrier: Any, out: Any, algorithm: str, max_requests: int, duration: float) -> None:
    """One racing process deciding through the guarded store directly, as the service asks it (with
    ``+allowances``, a busy client's decisions may take local allowances)."""
    runtime = build_runtime()  # never the parent's: its connections belong to the parent
    name, allowances = algorithm.removesuffix(ALLOWANCES), algorithm.endswith(ALLOWANCES)
    windows = LimitRule(id="race", name="race", rates=parse_rates(RATE), algorithm=name).windows
    tag = client_tag("u", str(RACE_USER_PK))

    def send() -> bool | None:
        try:
            return runtime.guard.decide_call(DecideCall(tag, windows, allowance_ok=allowances)).allowed
        except StoreUnavailable:
            return None

    _fire(send, barrier, out, max_requests, duration)
    runtime.close()


#: The peers raced through the same DRF view harness: algorithm -> view.
RACE_VIEWS: dict[str, type] = {
    "drf": DrfRaceView,
    "django_ratelimit": RatelimitRaceView,
    "limits_moving_window": LimitsMovingWindowRaceView,
    "limits_sliding_window": LimitsSlidingWindowRaceView,
}


def view_worker(barrier: Any, out: Any, algorithm: str, max_requests: int, duration: float) -> None:
    """One racing process going through a peer's view (DRF's throttle, django-ratelimit or limits)."""
    view = RACE_VIEWS[algorithm].as_view()
    user = BenchUser(pk=RACE_USER_PK)

    def send() -> bool | None:
        status = view(make_request("/race/", user)).status_code
        # A throttle refuses with 429; django-ratelimit's decorator raises PermissionDenied, a 403.
        return True if status == 200 else False if status in (403, 429) else None

    _fire(send, barrier, out, max_requests, duration)


def _allowed(algorithm: str, elapsed: float) -> int:
    """What the algorithm may admit for one client in ``elapsed`` seconds from empty."""
    rate = parse_rates(RATE)[0]
    if algorithm.startswith("token_bucket"):
        # A full bucket, plus what refills while the race runs.
        return rate.limit + math.floor(elapsed * rate.limit / rate.window)
    # One fixed window (the race avoids its edge), DRF's 60 s log, limits' moving window, or the first
    # minute of limits' sliding window counter (its windows start at the first hit).
    return rate.limit


def race(admin: redis.Redis, worker: Worker, algorithm: str, max_requests: int, duration: float) -> dict[str, Any]:
    """One race of ``PROCESSES`` forked workers on a freshly flushed Redis."""
    ctx = mp.get_context("fork")
    admin.flushall()
    # django-ratelimit's fixed window turns at an offset of its own for each key.
    offset = ratelimit_window_offset(RACE_USER_PK) if algorithm == "django_ratelimit" else 0
    avoid_window_edge(parse_rates(RATE)[0].window, needed=duration + 3, offset=offset)
    barrier, out = ctx.Barrier(PROCESSES), ctx.SimpleQueue()
    procs = [
        ctx.Process(target=worker, args=(barrier, out, algorithm, max_requests, duration), daemon=True)
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    results = [out.get() for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    elapsed = max(r.finished for r in results) - min(r.started for r in results)
    admitted = sum(r.admitted for r in results)
    return {
        "admitted": admitted,
        "denied": sum(r.denied for r in results),
        "errors": sum(r.errors for r in results),
        "elapsed_s": round(elapsed, 3),
        "allowed": _allowed(algorithm, elapsed),
    }


PEERS: dict[str, tuple[Worker, str]] = {
    "quota_fixed_window": (quota_worker, "fixed_window"),
    "quota_token_bucket": (quota_worker, "token_bucket"),
    "quota_fixed_window_allowances": (quota_worker, "fixed_window" + ALLOWANCES),
    "quota_token_bucket_allowances": (quota_worker, "token_bucket" + ALLOWANCES),
    "drf_user_rate": (view_worker, "drf"),
    "django_ratelimit": (view_worker, "django_ratelimit"),
    "limits_moving_window": (view_worker, "limits_moving_window"),
    "limits_sliding_window": (view_worker, "limits_sliding_window"),
}


def run(admin: redis.Redis, trials: int, max_requests: int, duration: float) -> dict[str, Any]:
    """Every peer ``trials`` times; Redis is flushed before each race."""
    # The parent's engine runs a rules-poller thread; stop it so no thread is
    # caught holding a lock at fork time (children build their own engines).
    default_engine.reset()
    out: dict[str, Any] = {"processes": PROCESSES, "rate": RATE, "max_requests_per_process": max_requests}
    for name, (worker, algorithm) in PEERS.items():
        runs = [race(admin, worker, algorithm, max_requests, duration) for _ in range(trials)]
        out[name] = {
            "trials": runs,
            "limit": parse_rates(RATE)[0].limit,
            "max_admitted": max(r["admitted"] for r in runs),
            "max_over": max(r["admitted"] - r["allowed"] for r in runs),
            "max_under": max(r["allowed"] - r["admitted"] for r in runs),
            "exact": all(r["admitted"] == r["allowed"] and not r["errors"] for r in runs),
        }
    return out
