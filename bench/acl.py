"""Section 7: the allow/deny list lookup, with 0 to 100,000 entries.

The lookup runs in-process on every throttled request (no Redis), so what
matters is that its cost stays flat as the list grows and stays small next
to one Redis round trip. The networks of allow and deny list feeds
(``plans.feeds``) are compiled into this same ``AccessList`` beside the
admin's entries, so the figures hold for both together.
"""

from __future__ import annotations

import ipaddress
import random
import statistics
import time
from typing import Any

from quotas.formats.acl import AccessList
from tests.acl_samples import build_sample

SIZES = (0, 1_000, 10_000, 100_000)


def run(lookups: int = 20_000) -> list[dict[str, Any]]:
    """Median and p99 nanoseconds of ``AccessList.match`` per list size (random IPv4 and IPv6 clients)."""
    rng = random.Random(1)
    clients = [
        ipaddress.IPv4Address(rng.getrandbits(32)) if i % 3 else ipaddress.IPv6Address(rng.getrandbits(128))
        for i in range(lookups)
    ]
    rows = []
    for size in SIZES:
        access = build_sample(size) if size else AccessList()
        now = time.time()
        samples = []
        for ip in clients:
            start = time.perf_counter_ns()
            access.match(key_id=7, subscription_id=3, user_id=None, ip=ip, scope="search", now=now)
            samples.append(time.perf_counter_ns() - start)
        samples.sort()
        rows.append(
            {
                "entries": size,
                "median_us": statistics.median(samples) / 1000,
                "p99_us": samples[int(len(samples) * 0.99)] / 1000,
            }
        )
    return rows
