"""A checked plans file made true in the database, each object validated by its model's ``full_clean`` as the admin
validates it, and saved only when it changed (so applying a file twice changes nothing the second time).

What the file covers, it describes whole: a plan in the file gets exactly the file's limits, period quotas and
budgets (others of that plan are deleted, and with a limit, the subscriptions' overrides of it). Plans and group
plans that are not in the file are left alone and reported, and deleted only with ``prune``. Subscriptions, keys,
caps and a subscription's own budgets and overrides are the customers' and never touched, except that a pruned
plan must have no subscriptions left.

Each save sends the models' ``post_save``/``post_delete``, so the rules every process reads follow the commit as
they follow an edit in the admin (plans/receivers.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models

from ..models import CostBudget, GroupPlan, Plan
from .read import PlansFileError, Problem
from .schema import GROUP_PLANS, LIMITS, PLANS, Document, Item, Section

CREATED, CHANGED, DELETED, KEPT = "created", "changed", "deleted", "kept"


@dataclass(frozen=True)
class Change:
    """One object created, changed (``fields``: name, old, new), deleted, or kept though not in the file."""

    action: str
    what: str
    fields: tuple[tuple[str, Any, Any], ...] = ()
    note: str = ""

    def lines(self) -> list[str]:
        note = f" ({self.note})" if self.note else ""
        return [f"{self.action:<8} {self.what}{note}"] + [
            f"           {name}: {shown(old)} -> {shown(new)}" for name, old, new in self.fields
        ]


def shown(value: Any) -> str:
    """A value as the file would write it."""
    if isinstance(value, Decimal):
        return f"{value.normalize():f}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


def apply_document(document: Document, *, prune: bool = False) -> list[Change]:
    """Make the database hold ``document``'s plans and group plans; returns what changed, in order.

    Call it inside a transaction: it raises :class:`PlansFileError` with every problem the models found (by line)
    after writing what it could, and the caller rolls back.
    """
    run = _Run(prune)
    run.absent(document)
    # A plan losing the default first, so the plan that takes it over meets no other default.
    for item in sorted(document.plans, key=lambda plan: bool(plan.values["is_default"])):
        run.plan(item)
    run.group_plans(document.group_plans)
    if run.problems:
        raise PlansFileError(sorted(run.problems, key=lambda problem: problem.line))
    return run.changes


class _Run:
    """One application of a file: the changes made and the problems met so far."""

    def __init__(self, prune: bool) -> None:
        self.prune = prune
        self.changes: list[Change] = []
        self.problems: list[Problem] = []
        self.plans: dict[str, Plan] = {plan.slug: plan for plan in Plan.objects.all()}

    def absent(self, document: Document) -> None:
        """Report, or with ``prune`` delete, the group plans and then the plans the file does not name."""
        named_groups = {item.key for item in document.group_plans}
        for group_plan in GroupPlan.objects.select_related("group", "plan").order_by("group__name"):
            if group_plan.group.name not in named_groups:
                self.leave_or_delete(group_plan, f"group plan {group_plan.group.name}", "")
        named_plans = {item.key for item in document.plans}
        for slug, plan in sorted(self.plans.items()):
            if slug in named_plans:
                continue
            subscriptions = plan.subscriptions.count()
            if self.prune and subscriptions:
                self.problems.append(
                    Problem(0, f"plan {slug}", f"not in the file, but {subscriptions} subscription(s) are on it: "
                            "move them to another plan before --prune deletes it")
                )  # fmt: skip
            else:
                self.leave_or_delete(plan, f"plan {slug}", "with its limits, period quotas and budgets")

    def leave_or_delete(self, obj: models.Model, what: str, deleted_with: str) -> None:
        if self.prune:
            obj.delete()
            self.changes.append(Change(DELETED, what, note=f"not in the file; {deleted_with}".rstrip("; ")))
        else:
            self.changes.append(Change(KEPT, what, note="not in the file; --prune deletes it"))

    def plan(self, item: Item) -> None:
        existing = self.plans.get(item.key)
        plan = existing or Plan()
        if self.saved(plan, item, PLANS, exclude=()):
            self.plans[item.key] = plan
        for child in PLANS.children:
            self.children(child, item, plan)

    def children(self, section: Section, plan_item: Item, plan: Plan) -> None:
        """Make ``plan``'s objects of ``section`` those of the file: delete the others, then create or update."""
        existing = {getattr(obj, section.key): obj for obj in getattr(plan, section.name).all()} if plan.pk else {}
        wanted = {item.key for item in plan_item.children[section.name]}
        for key, obj in sorted(existing.items()):
            if key not in wanted:
                note = "not in the file"
                if section is LIMITS and (overrides := obj.overrides.count()):
                    note += f"; with {overrides} subscription override(s) of it"
                obj.delete()
                self.changes.append(Change(DELETED, f"{section.noun} {plan.slug}/{key}", note=note))
        # Without an id the plan failed its own checks: its objects are checked all the same, but not saved.
        exclude = () if plan.pk else ("plan",)
        # A plan's budgets share one currency: each budget's clean() reads the others, so it runs once all are
        # written (the rest of full_clean before), and a file may move a plan to another currency in one go.
        later = section.model is CostBudget
        written = []
        for item in plan_item.children[section.name]:
            obj = existing.get(item.key) or section.model(plan=plan)
            if self.saved(obj, item, section, exclude=exclude, what=f"{plan.slug}/{item.key}", later=later):
                written.append((obj, item))
        for obj, item in written if later else ():
            self.validated(obj, item, lambda obj=obj: obj.clean())

    def saved(
        self, obj: Any, item: Item, section: Section, *, exclude: tuple[str, ...], what: str = "", later: bool = False
    ) -> bool:
        """Give ``obj`` the item's values, check it, and save it if it is new or changed: whether it passed."""
        old = None if obj.pk is None else {name: getattr(obj, name) for name in section.fields}
        for name, value in item.values.items():
            setattr(obj, name, value)
        check = (lambda: _all_but_clean(obj, exclude)) if later else (lambda: obj.full_clean(exclude=exclude))
        if not self.validated(obj, item, check) or "plan" in exclude:
            return False
        what = f"{section.noun} {what or item.key}"
        if old is None:
            obj.save()
            self.changes.append(Change(CREATED, what))
            return True
        changed = tuple(
            (name, old[name], getattr(obj, name)) for name in section.fields if old[name] != getattr(obj, name)
        )
        if changed:
            obj.save()
            self.changes.append(Change(CHANGED, what, changed))
        return True

    def validated(self, obj: models.Model, item: Item, check: Any, *, as_field: str = "") -> bool:
        """Run ``check`` (a model's validation): whether it passed; if not, its messages become problems at the
        lines of the fields they name (every one at field ``as_field``, if given)."""
        try:
            check()
        except ValidationError as exc:
            for field_name, messages in ValidationError(exc.update_error_dict({})).message_dict.items():
                name = as_field or field_name
                named = name in item.section.fields
                where = f"{item.where}.{name}" if named else item.where
                self.problems.extend(Problem(item.line_of(name), where, message) for message in messages)
            return False
        return True

    def group_plans(self, items: list[Item]) -> None:
        existing = {gp.group.name: gp for gp in GroupPlan.objects.select_related("group", "plan")}
        for item in items:
            plan = self.plans.get(item.values["plan"])
            group = self.group(item)
            if plan is None or plan.pk is None or group is None:
                continue  # the plan's or the group's own problems are reported
            group_plan = existing.get(item.key) or GroupPlan(group=group)
            old = group_plan.plan.slug if group_plan.pk else None
            group_plan.plan = plan
            if not self.validated(group_plan, item, group_plan.full_clean):
                continue
            what = f"{GROUP_PLANS.noun} {item.key}"
            if old is None:
                group_plan.save()
                self.changes.append(Change(CREATED, what, note=f"plan {plan.slug}"))
            elif old != plan.slug:
                group_plan.save()
                self.changes.append(Change(CHANGED, what, (("plan", old, plan.slug),)))

    def group(self, item: Item) -> Group | None:
        """The Django group the item names, created (empty) if there is none yet; None if its name is invalid."""
        group = Group.objects.filter(name=item.key).first()
        if group is None:
            group = Group(name=item.key)
            if not self.validated(group, item, group.full_clean, as_field="group"):
                return None
            group.save()
            self.changes.append(Change(CREATED, f"group {item.key}", note="for its group plan; no members yet"))
        return group


def _all_but_clean(obj: models.Model, exclude: tuple[str, ...]) -> None:
    """What ``full_clean`` checks but the model's ``clean()``; raises one ValidationError with every message."""
    errors: dict[str, Any] = {}
    for step in (obj.clean_fields, obj.validate_unique, obj.validate_constraints):
        try:
            step(exclude=exclude)
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
    if errors:
        raise ValidationError(errors)
