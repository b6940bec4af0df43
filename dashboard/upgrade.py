"""What a higher plan would have allowed a client over its last days, from its daily usage rows.

Per day, the client's demand is what it sent: admitted + refused by rate limits + refused by its budget. The
higher plan's daily capacity is the smaller of what its rate limits let through in a day and what its daily
budget pays for at the day's average cost per admitted request. What it would have allowed on top is
``max(0, min(demand, capacity) - allowed)``, summed over the days.

That is an upper bound ("up to"): a daily total cannot tell a burst of 1,000 requests in one second from
1,000 spread over the day, and a rate limit of 50/s refuses the burst even though 50/s allows 4 million a
day. Only limits that guard every request (no scope, path or method) cap the daily total; a scoped limit
caps only its scope's share, which the daily total does not separate, so counting it would understate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from quotas.formats.money import from_micros, to_micros
from quotas.rules.limits import LimitRule
from quotas.rules.snapshot import PlanRules, RuleSet

DAY = 86_400


@dataclass(frozen=True, slots=True)
class DayUsage:
    """One day of one client: admitted, refused by rate limits, refused by budget, and what it cost."""

    allowed: int
    refused_rate: int
    refused_budget: int
    cost: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class UpgradeFigures:
    """The prompt's figures: refusals over the days, what ``plan`` would have allowed of them, and how many
    times larger its rate capacity is (None when either plan has no limit on every request)."""

    plan: PlanRules
    refused_rate: int
    refused_budget: int
    would_allow: int
    factor: float | None


def day_usage(row: dict[str, Any]) -> DayUsage:
    """A :func:`usage.reports.build_report` row as :class:`DayUsage`."""
    return DayUsage(row["allowed"], row["denied_by"]["rate"], row["denied_by"]["budget"], Decimal(row["cost"]))


def rate_capacity(plan: PlanRules) -> float:
    """Requests a day ``plan``'s limits on every request let through: the smallest over their rates, each
    scaled to a day (100/min: 144,000; 1000/day: 1,000; a month's quota: a day's share). ``inf`` if none."""
    rates = [
        rate.limit * DAY / rate.window
        for rule in _on_every_request(plan.limits)
        if rule.algorithm != "budget"
        for rate in rule.rates
    ]
    return min(rates, default=math.inf)


def daily_budget(plan: PlanRules) -> Decimal | None:
    """The smallest of ``plan``'s budgets scaled to a day (a month's budget: its daily share), or None."""
    budgets = [
        from_micros(round(rate.limit * DAY / rate.window))
        for rule in plan.limits
        if rule.algorithm == "budget" and not rule.shadow
        for rate in rule.rates
    ]
    return min(budgets, default=None)


def upgrade_figures(days: Iterable[DayUsage], current: PlanRules, target: PlanRules) -> UpgradeFigures:
    """What ``target`` would have allowed of the requests refused on ``current`` over ``days`` (see the
    module docstring for why it is an upper bound)."""
    rates = rate_capacity(target)
    budget = daily_budget(target)
    would_allow = refused_rate = refused_budget = 0
    for day in days:
        refused_rate += day.refused_rate
        refused_budget += day.refused_budget
        demand = day.allowed + day.refused_rate + day.refused_budget
        capacity = rates
        if budget is not None and day.cost > 0 and day.allowed > 0:
            # The day's average cost per admitted request: what the budget would have paid for.
            capacity = min(capacity, to_micros(budget) / (to_micros(day.cost) / day.allowed))
        allowed_then = demand if capacity >= demand else math.floor(capacity)
        would_allow += max(0, allowed_then - day.allowed)
    current_rates = rate_capacity(current)
    factor = rates / current_rates if math.isfinite(rates) and math.isfinite(current_rates) else None
    return UpgradeFigures(target, refused_rate, refused_budget, would_allow, factor)


def next_plan(rules: RuleSet, plan_id: int | None, offered_slug: str | None = None) -> PlanRules | None:
    """The plan to suggest: the standing's offer (``offered_slug``), else the cheapest higher plan with a larger
    limit (:meth:`RuleSet.upgrade_for`), else the cheapest higher plan; None on the top plan."""
    plan = rules.plans.get(plan_id) if plan_id is not None else None
    if plan is None:
        return None
    offered = next((p for p in rules.plans.values() if p.slug == offered_slug), None) if offered_slug else None
    if offered is not None:
        return offered
    for rule in plan.limits:
        for window in rule.windows if not rule.shadow else ():
            found = rules.upgrade_for(plan.id, window)
            if found is not None:
                return found
    higher = sorted((p for p in rules.plans.values() if (p.price, p.priority) > (plan.price, plan.priority)),
                    key=lambda p: (p.price, p.priority))  # fmt: skip
    return higher[0] if higher else None


def _on_every_request(limits: Sequence[LimitRule]) -> list[LimitRule]:
    return [r for r in limits if not r.shadow and not (r.scope or r.path_prefix or r.methods)]
