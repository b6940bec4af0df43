"""The adaptive multipliers as the adaptive app publishes them in Redis (JSON, by plan id), read strictly: the
engine's runtime and the platform's apps read them with this one parser, so the two never disagree."""

from __future__ import annotations

import json
import logging
import math

logger = logging.getLogger(__name__)


def parse_multipliers(raw: bytes | str | None) -> dict[int, float]:
    """The adaptive multipliers by plan id, as the adaptive app publishes them (quotas.contract.keys.multipliers_key).

    The value is JSON: ``{"<plan id>": multiplier, ..., "updated_at": ...}``.
    Entries that are not a plan id with a multiplier in ``(0, 1]`` are ignored
    (multipliers only ever reduce limits); an unreadable value counts as none.
    """
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (TypeError, ValueError):
        logger.warning("quotas: unreadable adaptive multipliers %r", raw[:200])
        return {}
    out: dict[int, float] = {}
    for key, value in body.items() if isinstance(body, dict) else ():
        try:
            plan_id, multiplier = int(key), float(value)
        except (TypeError, ValueError):
            continue  # "updated_at", or junk
        if math.isfinite(multiplier) and 0 < multiplier <= 1:
            out[plan_id] = multiplier
    return out
