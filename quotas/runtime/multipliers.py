"""The adaptive multipliers this process decides with, as the adaptive controller publishes them."""

from __future__ import annotations

from quotas.exceptions import StoreUnavailable
from quotas.store.published_multipliers import PublishedMultipliers


class Multipliers:
    """Each plan's multiplier (1.0 when none is published), read from Redis by the poller."""

    def __init__(self) -> None:
        #: By plan id; plans at 1.0 are left out, and so is None (no plan): ``by_plan.get(plan_id, 1.0)`` is any
        #: plan's multiplier, which the hot path reads so, without a call.
        self.by_plan: dict[int | None, float] = {}

    def get(self, plan_id: int | None) -> float:
        """Plan ``plan_id``'s multiplier (1.0 without a plan)."""
        return self.by_plan.get(plan_id, 1.0) if plan_id is not None else 1.0

    def refresh(self, published: PublishedMultipliers) -> bool:
        """Read the published multipliers; True when they changed. Redis away: the last known are kept."""
        try:
            by_plan: dict[int | None, float] = {plan: m for plan, m in published.read().items() if m != 1.0}
        except StoreUnavailable:
            return False
        if by_plan == self.by_plan:
            return False
        self.by_plan = by_plan
        return True
