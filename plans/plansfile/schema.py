"""What a plans file holds, section by section, and a file's values checked against it (types, unknown fields,
keys given twice, references to plans) before any model sees them.

A missing field takes its model field's default, for a new object and an existing one alike: the file describes
each object whole, so applying it gives the same plans on any database.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import models

from ..models import CostBudget, EndpointLimit, GroupPlan, PeriodQuota, Plan
from .read import Node, PlansFileError, Problem

#: The file format's version, written by export; a file may leave it out.
VERSION = 1


@dataclass(frozen=True)
class Section:
    """One kind of object in the file: its model, its natural key and its fields, in the order export writes
    them (the key first)."""

    name: str
    noun: str
    model: type[models.Model]
    key: str
    fields: tuple[str, ...]
    children: tuple[Section, ...] = ()

    def model_field(self, name: str) -> Any:
        return self.model._meta.get_field(name)


LIMITS = Section(
    "limits", "limit", EndpointLimit, "name",
    ("name", "scope", "path_prefix", "methods", "countries", "algorithm", "rates", "burst", "weight", "max_delay",
     "shadow", "refund_on_error", "price"),
)  # fmt: skip
PERIOD_QUOTAS = Section(
    "period_quotas", "period quota", PeriodQuota, "name", ("name", "scope", "period", "units", "unit")
)
# A plan's own budgets only: a subscription's budgets are its customer's, and so are caps, keys and overrides.
BUDGETS = Section("budgets", "budget", CostBudget, "period", ("period", "amount", "currency"))
PLANS = Section(
    "plans", "plan", Plan, "slug",
    ("slug", "name", "monthly_price", "description", "priority", "is_default", "ban_threshold", "ban_window",
     "ban_durations", "local_allowances"),
    children=(LIMITS, PERIOD_QUOTAS, BUDGETS),
)  # fmt: skip
#: A group by its name, a plan by its slug.
GROUP_PLANS = Section("group_plans", "group plan", GroupPlan, "group", ("group", "plan"))
TOP_LEVEL = ("version", PLANS.name, GROUP_PLANS.name)


@dataclass
class Item:
    """One object of the file: where it is, the value of every field of its section (a missing one is its model
    field's default), the line of each field given, and its children (a plan's limits, quotas and budgets)."""

    section: Section
    where: str
    line: int
    values: dict[str, Any]
    lines: dict[str, int]
    children: dict[str, list[Item]] = field(default_factory=dict)

    @property
    def key(self) -> Any:
        return self.values[self.section.key]

    def line_of(self, name: str) -> int:
        return self.lines.get(name, self.line)


@dataclass
class Document:
    """A plans file, checked: its plans and its group plans."""

    plans: list[Item]
    group_plans: list[Item]


class _Wrong(Exception):
    """A value of the wrong type (the message says what was expected)."""


def document(root: Node) -> Document:
    """``root`` checked against the sections. Raises :class:`PlansFileError` with every problem found."""
    problems: list[Problem] = []
    if not isinstance(root.value, dict):
        raise PlansFileError([Problem(root.line, "", "expected a mapping with `plans:` and `group_plans:`")])
    for name, node in root.value.items():
        if name not in TOP_LEVEL:
            problems.append(Problem(node.line, name, _unknown(name, TOP_LEVEL)))
    version = root.value.get("version")
    if version is not None and (version.value != VERSION or isinstance(version.value, bool)):
        problems.append(Problem(version.line, "version", f"{_shown(version)} is not a version this reads ({VERSION})"))
    plans = _items(PLANS, root.value.get(PLANS.name), PLANS.name, problems)
    group_plans = _items(GROUP_PLANS, root.value.get(GROUP_PLANS.name), GROUP_PLANS.name, problems)
    slugs = [plan.key for plan in plans]
    for group_plan in group_plans:
        if group_plan.values["plan"] not in slugs:
            known = ", ".join(slugs) or "none"
            problems.append(
                Problem(
                    group_plan.line_of("plan"),
                    f"{group_plan.where}.plan",
                    f"no plan {json.dumps(group_plan.values['plan'])} in this file (its plans: {known})",
                )
            )
    if problems:
        raise PlansFileError(sorted(problems, key=lambda p: p.line))
    return Document(plans, group_plans)


def _items(section: Section, node: Node | None, where: str, problems: list[Problem]) -> list[Item]:
    """The objects of one list in the file (none where it is missing), each problem added to ``problems``."""
    if node is None or node.value is None:
        return []
    if not isinstance(node.value, list):
        problems.append(Problem(node.line, where, f"expected a list of {section.noun}s, got {_what(node)}"))
        return []
    items: list[Item] = []
    seen: dict[Any, int] = {}
    for index, entry in enumerate(node.value):
        before = len(problems)
        item = _item(section, entry, f"{where}[{index}]", problems)
        if item is None or section.key not in item.values:
            continue
        if item.key in seen:
            problems.append(
                Problem(
                    item.line_of(section.key),
                    f"{item.where}.{section.key}",
                    f"{json.dumps(item.key)} is given twice (first on line {seen[item.key]})",
                )
            )
            continue
        seen[item.key] = item.line_of(section.key)
        if len(problems) == before:
            items.append(item)
    return items


def _item(section: Section, node: Node, where: str, problems: list[Problem]) -> Item | None:
    """The object ``node`` describes (None unless a mapping), its problems added to ``problems``."""
    if not isinstance(node.value, dict):
        problems.append(Problem(node.line, where, f"expected a mapping (a {section.noun}), got {_what(node)}"))
        return None
    item = Item(section, where, node.line, {}, {})
    children = {child.name: child for child in section.children}
    for name, value in node.value.items():
        if name in children:
            item.children[name] = _items(children[name], value, f"{where}.{name}", problems)
        elif name not in section.fields:
            problems.append(Problem(value.line, f"{where}.{name}", _unknown(name, (*section.fields, *children))))
    for name in section.fields:
        given = node.value.get(name)
        if given is None:
            if name == section.key or section.model_field(name).is_relation:
                problems.append(
                    Problem(node.line, f"{where}.{name}", f"missing: every {section.noun} names its {name}")
                )
            else:
                item.values[name] = section.model_field(name).get_default()
            continue
        item.lines[name] = given.line
        try:
            item.values[name] = _convert(section.model_field(name), given)
        except _Wrong as exc:
            problems.append(Problem(given.line, f"{where}.{name}", str(exc)))
    for child in section.children:
        item.children.setdefault(child.name, [])
    return item


def _convert(model_field: Any, node: Node) -> Any:
    """``node``'s value for ``model_field``: a number or a flag must be one; a text field takes a scalar as
    written (YAML reads ``NO`` or ``1.0`` as other types than the text meant)."""
    value = node.value
    if isinstance(value, dict | list):
        raise _Wrong(f"expected a single value, got {_what(node)}")
    if value is None:
        if model_field.null:
            return None
        if model_field.is_relation or not model_field.blank:
            raise _Wrong("is empty")
        return model_field.get_default() if model_field.has_default() else ""
    if model_field.is_relation or isinstance(model_field, models.CharField | models.TextField):
        return node.text if node.text else str(value)
    return _number_or_flag(model_field, node)


def _number_or_flag(model_field: Any, node: Node) -> Any:
    value = node.value
    if isinstance(model_field, models.BooleanField):
        if isinstance(value, bool):
            return value
        raise _Wrong(f"{_shown(node)} is not true or false")
    if isinstance(value, bool):
        raise _Wrong(f"{_shown(node)} is not a number")
    if isinstance(model_field, models.IntegerField):
        if isinstance(value, int):
            return value
        raise _Wrong(f"{_shown(node)} is not a whole number")
    if isinstance(model_field, models.FloatField):
        if isinstance(value, int | float):
            return float(value)
        raise _Wrong(f"{_shown(node)} is not a number")
    return _decimal(node)


def _decimal(node: Node) -> Decimal:
    # From the text as written, never through a float: 0.1 stays 0.1.
    try:
        number = Decimal(str(node.value) if isinstance(node.value, int) else node.text.strip())
    except InvalidOperation:
        raise _Wrong(f"{_shown(node)} is not a number") from None
    if not number.is_finite():
        raise _Wrong(f"{_shown(node)} is not a number")
    # 1.0e-06 is 0.000001: six decimal places, as the model's field counts them, not seven.
    return number.normalize()


def _unknown(name: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"unknown field (did you mean {close[0]!r}?)"
    return f"unknown field (known: {', '.join(known)})"


def _what(node: Node) -> str:
    if isinstance(node.value, dict):
        return "a mapping"
    if isinstance(node.value, list):
        return "a list"
    return _shown(node)


def _shown(node: Node) -> str:
    return json.dumps(node.text if node.text else str(node.value))
