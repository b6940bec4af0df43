"""Section 11: one busy client far below its limit, in process: own cost and Redis calls per request.

One user sends every request of a variant (as one busy API client does), so
QuotaThrottle's decisions take local allowances (``QUOTAS['ALLOWANCES']``,
on by default) and most requests need no Redis call. The peer, ``limits``'
sliding window counter, makes one round trip per request whatever the
client. Variants rotate their order every round as in sections 1-2.

Redis calls per request count the round trips this process made while a
variant ran (every write of a command, or of a pipeline, to a redis-py
connection, and every command the store writes on the socket itself),
divided by the requests: the poller's background work (usage
written, allowances given back, the rules version read) is included, since
it runs in its thread throughout. Commands a script runs inside Redis are
not round trips and are not counted.
"""

from __future__ import annotations

import gc
import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import perf_counter_ns
from typing import Any

from redis.connection import AbstractConnection

from quotas.middleware import QuotaHeadersMiddleware
from quotas.store import transport

from .stats import summarize_ns
from .views import BenchUser, FiveLimitsView, LimitsSlidingWindowView, OneLimitView, TinyView, make_request

BASELINE = "baseline"
#: The variants: key -> (view class, path). One user each, far below every limit.
HOT: dict[str, tuple[type, str]] = {
    "quota_1": (OneLimitView, "/one/"),
    "quota_5": (FiveLimitsView, "/five/"),
    "limits_sliding_window": (LimitsSlidingWindowView, "/limits-swc/"),
}
#: One user per variant, with ids no other section uses.
_USERS = {key: BenchUser(pk=900_000_000 + i) for i, key in enumerate(HOT)}


def _time_view(view: Callable[[Any], Any], path: str, user: BenchUser, n: int) -> list[int]:
    samples = [0] * n
    for i in range(n):
        request = make_request(path, user)  # built outside the timing
        start = perf_counter_ns()
        response = view(request)
        samples[i] = perf_counter_ns() - start
        if response.status_code != 200:
            raise RuntimeError(f"a request to {path} answered {response.status_code}; rates must never deny here")
    return samples


@contextmanager
def counting_round_trips() -> Iterator[Callable[[], int]]:
    """Count every command this process (all threads) writes to Redis while inside; yields the count: each write
    through a redis-py connection, and each decision the store writes on the socket itself."""
    original = AbstractConnection.send_packed_command
    counter = itertools.count()
    sent = [0]
    inside = threading.local()  # in the store's own send, whose fallback goes through send_packed_command

    def send_packed_command(self: Any, command: Any, check_health: bool = True) -> None:
        if not getattr(inside, "on", False):
            sent[0] = next(counter) + 1  # itertools.count is atomic under the GIL: threads may send at once
        original(self, command, check_health)

    # The engine's decisions go out on the socket itself (LuaScript._send in quotas/store/transport.py), past
    # send_packed_command: one command each, a retry on a fresh connection included.
    direct = transport.LuaScript._send

    def store_send(self: Any, keys: Any, args: Any, functions: bool) -> Any:
        sent[0] = next(counter) + 1
        inside.on = True
        try:
            return direct(self, keys, args, functions)
        finally:
            inside.on = False

    AbstractConnection.send_packed_command = send_packed_command  # type: ignore[method-assign]
    transport.LuaScript._send = store_send  # type: ignore[method-assign]
    try:
        yield lambda: sent[0]
    finally:
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]
        transport.LuaScript._send = direct  # type: ignore[method-assign]


def run(rounds: int, per_round: int, warmup: int) -> dict[str, Any]:
    """Every variant ``rounds`` times ``per_round`` requests, one user each; own cost and Redis calls."""
    views = {BASELINE: (QuotaHeadersMiddleware(TinyView.as_view()), "/tiny/")}
    views.update({key: (QuotaHeadersMiddleware(cls.as_view()), path) for key, (cls, path) in HOT.items()})
    order = [BASELINE, *HOT]
    samples: dict[str, list[int]] = {key: [] for key in order}
    commands = dict.fromkeys(HOT, 0)
    for key in order:  # warm-up: the rules snapshot, the scripts, the user's first allowance
        view, path = views[key]
        _time_view(view, path, _USERS.get(key, BenchUser(pk=1)), warmup)
    with counting_round_trips() as round_trips:
        for r in range(rounds):
            for key in order[r % len(order) :] + order[: r % len(order)]:
                view, path = views[key]
                gc.collect()
                before = round_trips()
                samples[key] += _time_view(view, path, _USERS.get(key, BenchUser(pk=1)), per_round)
                if key in commands:
                    commands[key] += round_trips() - before
    summary: dict[str, Any] = {key: summarize_ns(values) for key, values in samples.items()}
    base = summary[BASELINE]["median_us"]
    peer = summary["limits_sliding_window"]["median_us"] - base
    for key in HOT:
        s = summary[key]
        s["own_median_us"] = round(s["median_us"] - base, 2)
        s["own_vs_limits"] = round(s["own_median_us"] / peer, 2) if peer > 0 else None
        s["redis_calls_per_request"] = round(commands[key] / (rounds * per_round), 3)
    return summary
