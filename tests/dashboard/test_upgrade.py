"""The upgrade prompt's figures (dashboard/upgrade.py) on hand-made days and plans."""

from __future__ import annotations

import math
from decimal import Decimal

from dashboard.upgrade import DayUsage, daily_budget, rate_capacity, upgrade_figures
from tests.factories import plan_rules

FREE = plan_rules(1, "0", "10/s; 100/min; 1000/day", scoped={"search": "10/min"}, budget_per_day="0.50")
PRO = plan_rules(2, "49", "50/s; 1000/min; 10000/day", scoped={"search": "100/min"}, budget_per_day="20.00")


def test_rate_capacity_is_the_smallest_rate_on_every_request_scaled_to_a_day():
    """1000/day beats 100/min (144,000) and 10/s; the scoped search limit does not cap the daily total."""
    assert (rate_capacity(FREE), rate_capacity(PRO)) == (1000, 10000)
    assert rate_capacity(plan_rules(3, "1", "2/min")) == 2880
    assert rate_capacity(plan_rules(4, "1", scoped={"search": "1/min"})) == math.inf


def test_daily_budget_is_the_smallest_budget_per_day():
    assert (daily_budget(FREE), daily_budget(PRO), daily_budget(plan_rules(5, "1", "1/s"))) == (
        Decimal("0.5"),
        Decimal("20"),
        None,
    )


def test_would_allow_sums_each_days_demand_up_to_the_capacity_minus_what_was_allowed():
    """Day 1: 1,000 + 1,234 refused = 2,234 ≤ 10,000: all 1,234. Day 2: 1,000 + 12,000 = 13,000: 9,000 of them.
    Day 3: nothing refused: nothing. Factor 10."""
    days = [DayUsage(1000, 1234, 0), DayUsage(1000, 12000, 0), DayUsage(400, 0, 0)]
    figures = upgrade_figures(days, FREE, PRO)
    assert (figures.refused_rate, figures.refused_budget, figures.would_allow) == (13234, 0, 1234 + 9000)
    assert figures.factor == 10
    assert figures.plan is PRO


def test_the_budget_caps_the_day_at_its_average_cost_per_request():
    """0.50 spent on 100 admitted requests: 0.005 each; Pro's 20.00 a day pays for 4,000, below its 10,000 rate
    capacity, so a demand of 5,100 gets 4,000 - 100 = 3,900 more."""
    days = [DayUsage(100, 0, 5000, Decimal("0.50"))]
    figures = upgrade_figures(days, FREE, PRO)
    assert (figures.refused_budget, figures.would_allow) == (5000, 3900)


def test_a_plan_without_limits_on_every_request_has_no_factor_and_no_rate_cap():
    target = plan_rules(6, "99", scoped={"search": "1000/min"})
    figures = upgrade_figures([DayUsage(10, 5, 0)], FREE, target)
    assert (figures.would_allow, figures.factor) == (5, None)
