"""The multipliers the controller publishes, and how the engine reads them.

One JSON key, ``<KEY_PREFIX>:adaptive:multipliers``::

    {"1": 0.45, "2": 0.8, "3": 1.0, "updated_at": 1795315810.25}

one entry per plan id (every plan is listed, 1.0 when it is not reduced) plus the controller's time.
The key expires after ``PUBLISH_TTL`` seconds, so if the controller stops, limits return to normal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import redis

from quotas.siblings import parse_multipliers

from . import store


def publish_multipliers(client: redis.Redis, multipliers: Mapping[int, float], now: float, ttl: float) -> None:
    """Replace the published multipliers (valid for ``ttl`` seconds)."""
    body: dict[str, float] = {str(plan_id): float(m) for plan_id, m in sorted(multipliers.items())}
    body["updated_at"] = round(now, 3)
    client.set(store.multipliers_key(), json.dumps(body), px=max(1, int(ttl * 1000)))


def read_multipliers(client: redis.Redis) -> dict[int, float]:
    """The published multipliers by plan id; ``{}`` when none are published (every plan at 1.0).

    Read with the engine's own parser (quotas.contract.protocol.parse_multipliers), so the two never disagree
    on what counts. Raises redis-py's ``RedisError`` when Redis cannot be read.
    """
    return parse_multipliers(client.get(store.multipliers_key()))
