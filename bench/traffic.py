"""Section 12, in process: a real API's traffic, 10,000 clients drawn from a Zipf distribution, three windows each.

Most public APIs have many clients that each send a few requests, and a few
busy ones: every request is drawn from :data:`CLIENTS` clients with
probability proportional to ``1 / rank`` (Zipf, s = 1), so the busiest
client sends about a tenth of the requests and most clients one or none.
Every variant enforces the same plan of three windows (per second, per
minute, per day; :data:`bench.rules.TRAFFIC_RATES`) the way its users would
(:mod:`bench.traffic_peers`), and every variant sees the same sequence of
clients, in the same order, on the same view behind the same middleware.

Per variant: req/s as a share of the unthrottled view's (the sum of the
requests' times, so a share of the process's time), own cost p50 and p99
(minus the baseline's), and, while it ran, Redis CPU (INFO cpu of the bench
Redis, which serves nothing else) and round trips (every write to a redis-py
connection in this process, background threads included) per request.
Variants rotate their order every round, as in sections 1-2.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Sequence
from itertools import accumulate
from time import perf_counter_ns
from typing import Any

import redis

from quotas.middleware import QuotaHeadersMiddleware
from quotas.throttling import QuotaThrottle

from . import traffic_peers
from .hot import counting_round_trips
from .rules import TRAFFIC_SCOPE
from .stats import summarize_ns
from .views import BenchUser, TinyView, make_request

CLIENTS = 10_000
ZIPF_S = 1.0
SEED = 20261126
BASELINE = "baseline"
#: User ids of this section start here (no other section's users share its state).
FIRST_USER = 500_000_000


class TrafficQuotaView(TinyView):
    throttle_classes = (QuotaThrottle,)
    quota_scope = TRAFFIC_SCOPE


class TrafficDrfView(TinyView):
    throttle_classes = traffic_peers.DRF_THROTTLES


@traffic_peers.stacked_ratelimits
class TrafficRatelimitView(TinyView):
    pass


class TrafficLimitsView(TinyView):
    throttle_classes = (traffic_peers.LimitsThreeWindows,)


#: The variants: key -> view class. Keys are shared with the HTTP half (bench.traffic_http).
VIEWS: dict[str, type] = {
    "quota": TrafficQuotaView,
    "drf": TrafficDrfView,
    "django_ratelimit": TrafficRatelimitView,
    "limits": TrafficLimitsView,
}


def zipf_clients(n: int, clients: int = CLIENTS, s: float = ZIPF_S, seed: int = SEED) -> list[int]:
    """``n`` client numbers (0 the busiest) drawn from a Zipf distribution over ``clients``, reproducibly."""
    cumulative = list(accumulate(1 / rank**s for rank in range(1, clients + 1)))
    return random.Random(seed).choices(range(clients), cum_weights=cumulative, k=n)


def spread(sequence: Sequence[int]) -> dict[str, Any]:
    """How the drawn traffic falls: distinct clients, the busiest one's share, requests from a client seen before."""
    seen: set[int] = set()
    repeats = 0
    counts: dict[int, int] = {}
    for client in sequence:
        repeats += client in seen
        seen.add(client)
        counts[client] = counts.get(client, 0) + 1
    return {
        "requests": len(sequence),
        "distinct_clients": len(seen),
        "busiest_share": round(max(counts.values()) / len(sequence), 3),
        "repeat_share": round(repeats / len(sequence), 3),
    }


def _time_view(view: Callable[[Any], Any], users: Sequence[BenchUser]) -> list[int]:
    samples = [0] * len(users)
    failed = 0
    for i, user in enumerate(users):
        request = make_request("/traffic/", user)  # built outside the timing
        start = perf_counter_ns()
        response = view(request)
        samples[i] = perf_counter_ns() - start
        failed += response.status_code != 200
    if failed:
        raise RuntimeError(f"{failed} of {len(users)} traffic requests were refused; the plan must never deny")
    return samples


def _redis_cpu(admin: redis.Redis) -> float:
    cpu = admin.info("cpu")
    return float(cpu["used_cpu_user"] + cpu["used_cpu_sys"])


def run(redis_url: str, rounds: int, per_round: int, warmup: int) -> dict[str, Any]:
    """Every variant over the same Zipf sequence of ``rounds * per_round`` requests; the summary."""
    admin = redis.Redis.from_url(redis_url)
    sequence = zipf_clients(rounds * per_round)
    users = [BenchUser(pk=FIRST_USER + c) for c in sequence]
    views = {BASELINE: QuotaHeadersMiddleware(TinyView.as_view())}
    views.update({key: QuotaHeadersMiddleware(cls.as_view()) for key, cls in VIEWS.items()})
    order = list(views)
    for key in order:  # warm-up on clients of their own: connections, scripts, the rules snapshot, code paths
        _time_view(views[key], [BenchUser(pk=FIRST_USER - 1 - i) for i in range(warmup)])
    samples: dict[str, list[int]] = {key: [] for key in order}
    cpu = dict.fromkeys(order, 0.0)
    trips = dict.fromkeys(order, 0)
    with counting_round_trips() as round_trips:
        for r in range(rounds):
            batch = users[r * per_round : (r + 1) * per_round]
            for key in order[r % len(order) :] + order[: r % len(order)]:
                gc.collect()
                cpu_before = _redis_cpu(admin)
                trips_before = round_trips()  # read between the INFO calls, which it must not count
                samples[key] += _time_view(views[key], batch)
                trips[key] += round_trips() - trips_before
                cpu[key] += _redis_cpu(admin) - cpu_before
    admin.close()
    return _summarize(samples, cpu, trips, spread(sequence))


def _summarize(
    samples: dict[str, list[int]], cpu: dict[str, float], trips: dict[str, int], traffic: dict[str, Any]
) -> dict[str, Any]:
    summary: dict[str, Any] = {"traffic": traffic, "clients": CLIENTS, "zipf_s": ZIPF_S}
    base = summarize_ns(samples[BASELINE])
    base_total = sum(samples[BASELINE])
    summary[BASELINE] = base
    for key in VIEWS:
        s: dict[str, Any] = summarize_ns(samples[key])
        n = len(samples[key])
        s["rps_share"] = round(base_total / sum(samples[key]), 3)
        s["own_median_us"] = round(s["median_us"] - base["median_us"], 2)
        s["own_p99_us"] = round(s["p99_us"] - base["p99_us"], 2)
        s["redis_cpu_us"] = round(cpu[key] / n * 1e6, 2)
        s["round_trips"] = round(trips[key] / n, 3)
        summary[key] = s
    peer = min(summary[key]["own_median_us"] for key in VIEWS if key != "quota")
    summary["quota"]["own_vs_best_peer"] = round(summary["quota"]["own_median_us"] / peer, 2) if peer > 0 else None
    return summary
