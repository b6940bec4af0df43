"""A large, varied access list for tests and benchmarks (deterministic for a seed)."""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from quotas.formats.acl import AccessList, ACLRule


def build_sample(n: int, seed: int = 0) -> AccessList:
    """An access list of ``n`` varied entries (deterministic for a seed).

    Mostly IPv4 /32 and /24 denies, some IPv6 /128, /64 and /48 networks, and
    API keys, users and subscriptions, a tenth of them scoped and a tenth expiring.
    """
    rng = random.Random(seed)
    rules = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.5:
            value: Any = ipaddress.IPv4Network((rng.getrandbits(32), rng.choice((32, 32, 24, 16))), strict=False)
            kind = "ip"
        elif roll < 0.7:
            value = ipaddress.IPv6Network((rng.getrandbits(128), rng.choice((128, 64, 48))), strict=False)
            kind = "ip"
        else:
            kind = rng.choice(("key", "user", "subscription"))
            value = rng.randrange(1, 10 * n + 2)
        rules.append(
            ACLRule(
                id=i + 1,
                action="allow" if rng.random() < 0.2 else "deny",
                kind=kind,
                value=value,
                scope="search" if rng.random() < 0.1 else "",
                expires_at=rng.uniform(0, 2e9) if rng.random() < 0.1 else None,
                reason=f"sample {i + 1}",
            )
        )
    return AccessList(rules)
