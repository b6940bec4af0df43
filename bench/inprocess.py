"""Sections 1 and 2: cost per request in-process, and one bare Redis GET.

Each variant calls the same DRF view through ``APIRequestFactory`` and
``view(request)``; only the limiter differs (a DRF throttle, or
django-ratelimit's decorator on the handler). Variants are measured in
rounds, rotating their order every round, so that drift on the machine
(CPU frequency, other processes, Redis housekeeping) spreads over all of
them instead of biasing whichever ran last. The bare GET is one of the
rotated variants, so the ratios compare figures taken side by side.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import redis

from quotas.middleware import QuotaHeadersMiddleware

from .stats import summarize_ns
from .views import (
    BenchUser,
    DrfThrottledView,
    FiveLimitsView,
    LimitsMovingWindowView,
    LimitsSlidingWindowView,
    OneGetThrottle,
    OneGetView,
    OneLimitView,
    RatelimitView,
    TenLimitsView,
    TinyView,
    make_anonymous_request,
    make_request,
)

#: Requests each user sends per round: one, so every decision is a cold one, made for a client this process
#: has not seen (no local allowance can serve it; section 11 measures a busy client). DRF's throttle keeps
#: every timestamp of the window in one pickled list per user, so a new user is also its cheapest case.
REQUESTS_PER_USER = 1

BASELINE = "baseline"
REDIS_GET = "redis_get"

#: The throttled variants: key -> (view class, path).
THROTTLED: dict[str, tuple[type, str]] = {
    "one_get": (OneGetView, "/floor/"),
    "drf_user_rate": (DrfThrottledView, "/drf/"),
    "django_ratelimit": (RatelimitView, "/ratelimit/"),
    "limits_moving_window": (LimitsMovingWindowView, "/limits-mw/"),
    "limits_sliding_window": (LimitsSlidingWindowView, "/limits-swc/"),
    "quota_1": (OneLimitView, "/one/"),
    "quota_1_anon": (OneLimitView, "/one/"),  # no user: counted by client address, like DRF's AnonRateThrottle
    "quota_5": (FiveLimitsView, "/five/"),
    "quota_10_budget": (TenLimitsView, "/ten/"),
}


class BenchError(RuntimeError):
    """A measurement that would be meaningless (a request refused or failed)."""


@dataclass
class _UserIds:
    """Hands out user ids never used before in this run."""

    next_pk: int = 1

    def take(self, requests: int) -> list[BenchUser]:
        count = max(1, math.ceil(requests / REQUESTS_PER_USER))
        users = [BenchUser(pk=self.next_pk + j) for j in range(count)]
        self.next_pk += count
        return users


#: Variants whose requests carry no user: each BenchUser stands for one client address instead.
ANONYMOUS = {"quota_1_anon"}


def _time_view(
    view: Callable[[Any], Any], path: str, users: list[BenchUser], n: int, anonymous: bool = False
) -> list[int]:
    """Nanoseconds of ``view(request)`` for ``n`` requests, users (or their addresses) in turn."""
    samples = [0] * n
    failed = 0
    for i in range(n):
        user = users[i % len(users)]
        # Built outside the timing.
        request = make_anonymous_request(path, user.pk) if anonymous else make_request(path, user)
        start = perf_counter_ns()
        response = view(request)
        samples[i] = perf_counter_ns() - start
        failed += response.status_code != 200
    if failed:
        raise BenchError(f"{failed} of {n} requests to {path} were not 200; rates must never deny here")
    return samples


def _time_get(client: redis.Redis, n: int) -> list[int]:
    """Nanoseconds of one ``GET x`` round trip, ``n`` times."""
    samples = [0] * n
    for i in range(n):
        start = perf_counter_ns()
        client.get("x")
        samples[i] = perf_counter_ns() - start
    return samples


def run(redis_url: str, rounds: int, per_round: int, warmup: int) -> dict[str, Any]:
    """Measure every variant ``rounds`` times ``per_round`` requests; return the summary."""
    client = redis.Redis.from_url(redis_url)
    OneGetThrottle.client = client
    ids = _UserIds()
    # Every variant runs behind QuotaHeadersMiddleware, as in a real project: the
    # headers it adds are part of QuotaThrottle's cost (and a no-op for the others).
    views: dict[str, tuple[Callable[[Any], Any], str]] = {
        BASELINE: (QuotaHeadersMiddleware(TinyView.as_view()), "/tiny/")
    }
    views.update({key: (QuotaHeadersMiddleware(cls.as_view()), path) for key, (cls, path) in THROTTLED.items()})

    def measure(key: str, n: int) -> list[int]:
        if key == REDIS_GET:
            return _time_get(client, n)
        view, path = views[key]
        return _time_view(view, path, ids.take(n), n, anonymous=key in ANONYMOUS)

    order = [BASELINE, *THROTTLED, REDIS_GET]
    # Warm-up: connections, the script's SHA, the rules snapshot, code paths.
    for key in order:
        measure(key, warmup)
    samples: dict[str, list[int]] = {key: [] for key in order}
    for r in range(rounds):
        for key in order[r % len(order) :] + order[: r % len(order)]:
            gc.collect()  # start every batch with the same (empty) garbage backlog
            samples[key] += measure(key, per_round)
    client.close()
    return _summarize(samples)


def _summarize(samples: dict[str, list[int]]) -> dict[str, Any]:
    summary = {key: summarize_ns(values) for key, values in samples.items()}
    base, get = summary[BASELINE], summary[REDIS_GET]
    for key in THROTTLED:
        s = summary[key]
        s["own_median_us"] = round(s["median_us"] - base["median_us"], 2)
        s["own_p99_us"] = round(s["p99_us"] - base["p99_us"], 2)
        s["own_vs_get"] = round(s["own_median_us"] / get["median_us"], 2)
    floor = summary["one_get"]["own_median_us"]
    for key in THROTTLED:
        summary[key]["own_vs_floor"] = round(summary[key]["own_median_us"] / floor, 2) if floor > 0 else None
    return summary
