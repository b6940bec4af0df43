"""The adaptive multipliers in Redis: one JSON key, ``<prefix>:adaptive:multipliers``.

The adaptive controller publishes them (:meth:`PublishedMultipliers.publish`); every process decides with
what :meth:`PublishedMultipliers.read` returns, parsed by the engine's one parser
(:func:`quotas.formats.multipliers.parse_multipliers`). Every call raises
:class:`~quotas.exceptions.StoreUnavailable` when Redis fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from quotas.contract.keys import multipliers_key
from quotas.formats.multipliers import parse_multipliers
from quotas.store.failures import unavailable


class PublishedMultipliers:
    """The multipliers published under ``prefix`` in the Redis ``client`` holds."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.key = multipliers_key(prefix)

    def read(self) -> dict[int, float]:
        """The published multipliers by plan id; ``{}`` when none are (every plan at 1.0)."""
        with unavailable("reading the multipliers"):
            raw = self._client.get(self.key)
        return parse_multipliers(raw)

    def publish(self, multipliers: Mapping[int, float], now: float, ttl: float) -> None:
        """Replace the published multipliers with ``multipliers`` (by plan id) at ``now``, valid ``ttl`` seconds:
        if the controller stops publishing, limits return to normal."""
        body: dict[str, float] = {str(plan_id): float(m) for plan_id, m in sorted(multipliers.items())}
        body["updated_at"] = round(now, 3)
        with unavailable("publishing the multipliers"):
            self._client.set(self.key, json.dumps(body), px=max(1, int(ttl * 1000)))
