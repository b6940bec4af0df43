"""Signal receivers: what the engine signals becomes an event with its deliveries (notifications.record)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from plans.models import CostBudget, Subscription
from plans.models.caps import cap_name
from quotas.formats.money import api_amount, from_micros

from .events import BUDGET_THRESHOLD
from .record import record_quietly


def _currency_of(subscription: Subscription, budget: str) -> str:
    """The currency of ``budget`` (a signal from an earlier release names none): its own budget's, else its
    plan's."""
    owned = [*CostBudget.objects.filter(subscription=subscription), *CostBudget.objects.filter(plan=subscription.plan)]
    return next((b.currency for b in owned if budget in (b.name, cap_name(b.period))), "")


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
    limit, unit = str(kwargs.get("limit") or budget), str(kwargs.get("unit") or "money")
    data: dict[str, Any] = {
        "subscription": {"id": subscription.pk, "name": subscription.name, "plan": subscription.plan.slug},
        "budget": budget,
        "threshold": threshold,
        "period_start": period_start.isoformat(),
    }
    if unit == "money":
        data.update(spent=api_amount(from_micros(spent_micros)), amount=api_amount(from_micros(amount_micros)),
                    currency=kwargs.get("currency") or _currency_of(subscription, budget))  # fmt: skip
    else:  # a period quota: in its own unit, no money
        data.update(unit=unit, used=spent_micros, limit=amount_micros)
    if limit.startswith("kc"):  # a key's own cap (plans.rules.key_rules): named by the key (and its rolls)
        data["key"] = {"id": int(limit[2:])}
    # Named by the limit's id: two keys' caps of one subscription, or a cap and its budget, are events apart.
    key = f"{BUDGET_THRESHOLD}:{client_tag.strip('{}')}:{limit}:{period_start.isoformat()}:{threshold}"
    record_quietly(BUDGET_THRESHOLD, subscription, key, data, timezone.now())
