"""Plans given by Django group membership."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models

from .plans import Plan


class GroupPlan(models.Model):
    """Members of a Django group are on a plan: a user's plan when they have no active subscription.

    Which plan a signed-in user is on (:meth:`plans.rules.PlansRulesBackend.subscriber_for_user`):

    1. their active :class:`~plans.models.Subscription`'s, always;
    2. else the plan of their mapped groups with the highest ``Plan.priority`` (a tie goes to the plan
       created first, the lowest id);
    3. else the default plan (``Plan.is_default``), as for anonymous clients.

    A group plan gives each member that plan's limits on counters of their own (client ``u.<user id>``, as a
    user on the default plan): ten members of a group on "100/min" get 100 a minute each, never 100 shared.
    There is no subscription to pool them under, so none of a subscription's extras apply (overrides, own
    budgets, a billing anchor other than the 1st, API keys, per-minute history).

    A model of its own rather than a ``Plan.groups`` many-to-many: ``group`` is one-to-one, so the database
    itself keeps a group to at most one plan (a many-to-many would let two plans claim one group, caught only
    by a form); the mapping has admin permissions of its own (``quota_plans.change_groupplan``), apart from
    editing plans' prices and limits; and its rows send ``post_save`` and ``post_delete`` like every other
    model the rules are built from (plans/receivers.py), where a many-to-many sends only ``m2m_changed``.
    """

    group = models.OneToOneField(
        Group,
        on_delete=models.CASCADE,
        related_name="quota_plan",
        help_text="Its members are on the plan below unless they have an active subscription (which always wins).",
    )
    plan = models.ForeignKey(
        Plan,
        on_delete=models.PROTECT,
        related_name="group_plans",
        help_text="A member of several mapped groups is on the plan of highest priority (a tie: the older plan).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group__name"]
        verbose_name = "group plan"

    def __str__(self) -> str:
        return f"{self.group} → {self.plan}"

    def validate_unique(self, exclude: Collection[str] | None = None) -> None:
        # A clearer message than "Group plan with this Group already exists": which plan has the group.
        if self.group_id and (exclude is None or "group" not in exclude):
            taken = GroupPlan.objects.filter(group_id=self.group_id).exclude(pk=self.pk).select_related("plan")
            other = taken.first()
            if other is not None:
                raise ValidationError(
                    {
                        "group": f"Group “{self.group}” is already on plan “{other.plan}”; a group has one plan: "
                        "change that mapping instead."
                    }
                )
        super().validate_unique(exclude=exclude)


def user_groups_field() -> Any:
    """The user model's many-to-many to :class:`Group` (``User.groups``), or None for a user model without one
    (no ``PermissionsMixin``): its users are then never on a group plan."""
    try:
        field = get_user_model()._meta.get_field("groups")
    except FieldDoesNotExist:
        return None
    return field if field.many_to_many and field.related_model is Group else None


def group_plan_id(user_id: Any) -> int | None:
    """The id of the plan user ``user_id``'s groups put them on (see :class:`GroupPlan`), or None."""
    field = user_groups_field()
    if field is None:
        return None
    members = {f"group__{field.related_query_name()}": user_id}
    mapped = GroupPlan.objects.filter(**members).order_by("-plan__priority", "plan_id")
    return mapped.values_list("plan_id", flat=True).first()
