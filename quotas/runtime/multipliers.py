"""The adaptive multipliers this process decides with, as the adaptive controller publishes them."""

from __future__ import annotations

from typing import Any

from quotas.contract.connect import STORE_ERRORS
from quotas.contract.keys import multipliers_key
from quotas.contract.protocol import parse_multipliers


class Multipliers:
    """Each plan's multiplier (1.0 when none is published), read from Redis by the poller."""

    def __init__(self, prefix: str) -> None:
        self.key = multipliers_key(prefix)
        #: By plan id; plans at 1.0 are left out.
        self.by_plan: dict[int, float] = {}

    def get(self, plan_id: int | None) -> float:
        """Plan ``plan_id``'s multiplier (1.0 without a plan)."""
        return self.by_plan.get(plan_id, 1.0) if plan_id is not None else 1.0

    def refresh(self, client: Any) -> bool:
        """Read the published multipliers; True when they changed. Redis away: the last known are kept."""
        try:
            raw = client.get(self.key)
        except STORE_ERRORS:
            return False
        by_plan = {plan: m for plan, m in parse_multipliers(raw).items() if m != 1.0}
        if by_plan == self.by_plan:
            return False
        self.by_plan = by_plan
        return True
