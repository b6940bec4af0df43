"""The plans app's signal receivers.

* Any change to plans, limits, keys, access lists, group plans, or a mapped
  group's members reaches every process's rules snapshot: this process marks
  its snapshot stale at once; the shared version in Redis is bumped when the
  transaction commits, so other processes reload only data they can already
  read.
* What the engine reports is recorded: bans become ClientBan rows for the admin.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError
from django.db.models.signals import m2m_changed, post_delete, post_save

from quotas import internal_api

from .models import (
    ACLEntry,
    ACLFeed,
    AlertThresholds,
    APIKey,
    ClientBan,
    CostBudget,
    EndpointLimit,
    GroupPlan,
    LimitOverride,
    PeriodQuota,
    Plan,
    SpendCap,
    Subscription,
    user_groups_field,
)

logger = logging.getLogger(__name__)


def record_ban(*, client_tag: str, subscription_id: int | None, plan_id: int | None, until: Any, **kwargs: Any) -> None:
    """Store a ban so that staff can see and lift it; a database error never fails the request."""
    try:
        ClientBan.objects.create(
            client=client_tag,
            subscription=Subscription.objects.filter(pk=subscription_id).first() if subscription_id else None,
            plan=Plan.objects.filter(pk=plan_id).first() if plan_id else None,
            until=until,
        )
    except DatabaseError:
        logger.exception("plans: could not record the ban of %s", client_tag)


# An ACLFeed saved in the admin (enabled, action) reloads the rules; the refresh task writes with update() and
# bumps the version itself, only when a list in force changed.
WATCHED = (
    Plan, Subscription, GroupPlan, APIKey, EndpointLimit, LimitOverride, CostBudget, PeriodQuota, ACLEntry, ACLFeed,
    SpendCap, AlertThresholds,
)  # fmt: skip


def rules_changed(**kwargs: Any) -> None:
    internal_api.rules_changed()


def memberships_changed(*, action: str, reverse: bool, instance: Any, pk_set: set[Any] | None, **kwargs: Any) -> None:
    """Users joined or left groups (``user.groups`` or ``group.user_set``): the rules changed when one of those
    groups has a plan. Other groups are left alone: a project that files every new user into some group does
    not reload every process's rules on each sign-up."""
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if reverse:  # instance is the group
        groups = {instance.pk}
    elif pk_set is None:  # user.groups.clear(): which groups they left is no longer known
        internal_api.rules_changed()
        return
    else:
        groups = pk_set
    if GroupPlan.objects.filter(group_id__in=groups).exists():
        internal_api.rules_changed()


def connect_rules_changes() -> None:
    """Connect :func:`rules_changed` to every model the rules snapshot is built from, and
    :func:`memberships_changed` to the user model's group memberships (when it has groups)."""
    for model in WATCHED:
        uid = f"plans-rules-{model.__name__}"
        post_save.connect(rules_changed, sender=model, dispatch_uid=uid + "-save", weak=False)
        post_delete.connect(rules_changed, sender=model, dispatch_uid=uid + "-delete", weak=False)
    groups = user_groups_field()
    if groups is not None:
        through = groups.remote_field.through
        m2m_changed.connect(memberships_changed, sender=through, dispatch_uid="plans-rules-memberships", weak=False)
