"""The multipliers the controller publishes, and how the engine reads them.

One JSON key, ``<KEY_PREFIX>:adaptive:multipliers``::

    {"1": 0.45, "2": 0.8, "3": 1.0, "updated_at": 1795315810.25}

one entry per plan id (every plan is listed, 1.0 when it is not reduced) plus the controller's time.
The key expires after ``PUBLISH_TTL`` seconds, so if the controller stops, limits return to normal.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping

import redis

from . import store

logger = logging.getLogger(__name__)


def publish_multipliers(client: redis.Redis, multipliers: Mapping[int, float], now: float, ttl: float) -> None:
    """Replace the published multipliers (valid for ``ttl`` seconds)."""
    body: dict[str, float] = {str(plan_id): float(m) for plan_id, m in sorted(multipliers.items())}
    body["updated_at"] = round(now, 3)
    client.set(store.multipliers_key(), json.dumps(body), px=max(1, int(ttl * 1000)))


def read_multipliers(client: redis.Redis) -> dict[int, float]:
    """The published multipliers by plan id; ``{}`` when none are published (every plan at 1.0).

    Entries that are not a plan id with a multiplier in ``(0, 1]`` are ignored (and logged).
    Raises redis-py's ``RedisError`` when Redis cannot be read.
    """
    raw = client.get(store.multipliers_key())
    if raw is None:
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        logger.warning("adaptive: published multipliers are not JSON: %r", raw[:100])
        return {}
    if not isinstance(body, dict):
        return {}
    out = {}
    for key, value in body.items():
        if key == "updated_at":
            continue
        try:
            plan_id, multiplier = int(key), float(value)
        except (TypeError, ValueError):
            logger.warning("adaptive: ignoring published entry %r: %r", key, value)
            continue
        if math.isfinite(multiplier) and 0 < multiplier <= 1:
            out[plan_id] = multiplier
        else:
            logger.warning("adaptive: ignoring published multiplier %r for plan %s", value, key)
    return out
