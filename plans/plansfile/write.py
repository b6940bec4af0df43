"""The plans in the database as a plans file, YAML or JSON: every field of every object, keyed by slugs and
names (never ids), each list sorted by its key, so that an export diffs cleanly against the last one."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.db import models

from ..models import GroupPlan, Plan
from .read import YAML_EXTRA
from .schema import GROUP_PLANS, PLANS, VERSION, Section

HEADER = (
    "# Plans as code: the plans, their limits, period quotas and budgets, and the group plans.\n"
    "# Written by `manage.py quota_plans export`; apply with `manage.py quota_plans apply <file>`.\n"
)


def export_data() -> dict[str, Any]:
    """The plans and the group plans as data: lists, dicts, str, int, Decimal, float, bool and None."""
    plans = Plan.objects.order_by("slug").prefetch_related(*(child.name for child in PLANS.children))
    group_plans = GroupPlan.objects.select_related("group", "plan").order_by("group__name")
    return {
        "version": VERSION,
        PLANS.name: [_plan(plan) for plan in plans],
        GROUP_PLANS.name: [{"group": gp.group.name, "plan": gp.plan.slug} for gp in group_plans],
    }


def export_text(file_format: str) -> str:
    """:func:`export_data` as a YAML (with a header comment) or a JSON document. Raises ImportError for YAML
    without PyYAML."""
    data = export_data()
    if file_format == "json":
        return json.dumps(data, indent=2, ensure_ascii=False, default=_json_number) + "\n"
    try:
        import yaml
    except ImportError as exc:
        raise ImportError(YAML_EXTRA) from exc

    class Dumper(yaml.SafeDumper):
        """PyYAML's safe dumper, writing a decimal as the number it is (0.000001, never 1.0e-06)."""

    def decimal(dumper: yaml.SafeDumper, value: Decimal) -> yaml.ScalarNode:
        if value == value.to_integral_value():
            return dumper.represent_int(int(value))
        return dumper.represent_scalar("tag:yaml.org,2002:float", f"{value.normalize():f}")

    Dumper.add_representer(Decimal, decimal)
    return HEADER + yaml.dump(
        data, Dumper=Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120
    )


def _plan(plan: Plan) -> dict[str, Any]:
    data = _fields(PLANS, plan)
    for child in PLANS.children:
        related = getattr(plan, child.name).all()
        data[child.name] = [_fields(child, obj) for obj in sorted(related, key=lambda o: getattr(o, child.key))]
    return data


def _fields(section: Section, obj: models.Model) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in section.fields}


def _json_number(value: Any) -> Any:
    """A decimal as JSON writes a number: whole, or a float. Exact: the models' decimals have at most 14 digits,
    and a float's shortest form gives back up to 15 (the reader takes the number's text, never the float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"{type(value).__name__} is not JSON")
