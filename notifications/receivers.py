"""Signal receivers: what the engine signals becomes an event with its deliveries (notifications.record)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from plans.models import CostBudget, Subscription
from plans.models.caps import cap_name
from quotas.formats.money import from_micros

from .events import BUDGET_THRESHOLD
from .record import record_quietly


def budget_event(
    *,
    client_tag: str,
    subscription_id: int | None,
    budget: str,
    threshold: int,
    period_start: datetime,
    spent_micros: int,
    amount_micros: int,
    **kwargs: Any,
) -> None:
    """``quotas.signals.budget_threshold_crossed`` of a subscription: a ``budget.threshold_crossed`` event, once
    per budget, period and threshold."""
    if subscription_id is None:
        return  # an address or a user: nobody registered to hear of it
    subscription = Subscription.objects.filter(pk=subscription_id).select_related("plan").first()
    if subscription is None:
        return  # deleted meanwhile
    # The subscription's own budget of a period replaces its plan's: look there first.
    owned = [*CostBudget.objects.filter(subscription=subscription), *CostBudget.objects.filter(plan=subscription.plan)]
    # A customer's cap is the window of the budget it lowers (plans.rules.budget_rule): the same currency.
    currency = next((b.currency for b in owned if budget in (b.name, cap_name(b.period))), "")
    data = {
        "subscription": {"id": subscription.pk, "name": subscription.name, "plan": subscription.plan.slug},
        "budget": budget,
        "threshold": threshold,
        "period_start": period_start.isoformat(),
        "spent": str(from_micros(spent_micros)),
        "amount": str(from_micros(amount_micros)),
        "currency": currency,
    }
    key = f"{BUDGET_THRESHOLD}:{client_tag.strip('{}')}:{budget}:{period_start.isoformat()}:{threshold}"
    record_quietly(BUDGET_THRESHOLD, subscription, key, data, timezone.now())
