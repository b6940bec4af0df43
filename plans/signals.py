"""Any change to plans, limits or access lists reaches every process's rules snapshot.

This process marks its snapshot stale at once; the shared version in Redis
is bumped when the transaction commits, so other processes reload only data
they can already read.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save

from quotas.engine import get_engine

from .models import ACLEntry, APIKey, CostBudget, EndpointLimit, LimitOverride, PeriodQuota, Plan, Subscription

WATCHED = (Plan, Subscription, APIKey, EndpointLimit, LimitOverride, CostBudget, PeriodQuota, ACLEntry)


def rules_changed(**kwargs: Any) -> None:
    rules = get_engine().rules
    rules.mark_stale()
    transaction.on_commit(rules.invalidate)


def connect() -> None:
    for model in WATCHED:
        uid = f"plans-rules-{model.__name__}"
        post_save.connect(rules_changed, sender=model, dispatch_uid=uid + "-save", weak=False)
        post_delete.connect(rules_changed, sender=model, dispatch_uid=uid + "-delete", weak=False)
