"""Signal receivers: budget threshold crossings become :class:`BudgetAlert` rows."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import DatabaseError

from plans.models import Subscription

from .models import BudgetAlert

logger = logging.getLogger(__name__)


def record_budget_alert(
    *,
    client_tag: str,
    subscription_id: int | None,
    budget: str,
    threshold: int,
    period_start: datetime,
    spent_micros: int,
    amount_micros: int,
    **kwargs: Any,
) -> BudgetAlert | None:
    """Record ``quotas.signals.budget_threshold_crossed`` once per client, budget, period and threshold.

    Idempotent: a repeated signal finds the existing row. Runs on the request
    path, so a database failure is logged, not raised: the request must not
    fail because its alert could not be stored. A period quota's alert (counted
    in requests or units, not money) is not a budget's: no row.
    """
    if kwargs.get("unit", "money") != "money":
        return None
    client = client_tag.strip("{}")
    try:
        if subscription_id is not None and not Subscription.objects.filter(pk=subscription_id).exists():
            subscription_id = None  # deleted meanwhile; keep the alert, by client tag
        alert, created = BudgetAlert.objects.get_or_create(
            client=client,
            limit=str(kwargs.get("limit") or ""),  # two plans' day budgets share a name, not a limit
            budget=budget,
            period_start=period_start,
            threshold=threshold,
            defaults={
                "subscription_id": subscription_id,
                "spent_micros": spent_micros,
                "amount_micros": amount_micros,
            },
        )
    except DatabaseError:
        logger.exception("usage: could not record the %d%% alert of budget %r for %s", threshold, budget, client)
        return None
    if created:
        logger.info("usage: %s reached %d%% of budget %r", client, threshold, budget)
    return alert
