"""Plans, subscriptions, group plans, API keys, limits, budgets, customers' caps, access lists, their feeds and bans:
one module each."""

from .access import ACLEntry
from .bans import ClientBan
from .budgets import CostBudget, Period, PeriodQuota
from .caps import AlertThresholds, SpendCap
from .feeds import ACLFeed
from .groups import GroupPlan, group_plan_id, user_groups_field
from .keys import API_KEY_PREFIX, APIKey, APIKeyQuerySet, KeyState
from .limits import EndpointLimit, LimitOverride
from .plans import Plan, Subscription
from .rules_changes import RulesChange
from .validators import (
    HTTP_METHODS,
    parse_durations,
    validate_cidr,
    validate_durations,
    validate_methods,
    validate_rates,
)

__all__ = [
    "API_KEY_PREFIX",
    "HTTP_METHODS",
    "ACLEntry",
    "ACLFeed",
    "APIKey",
    "APIKeyQuerySet",
    "AlertThresholds",
    "ClientBan",
    "CostBudget",
    "EndpointLimit",
    "GroupPlan",
    "KeyState",
    "LimitOverride",
    "Period",
    "PeriodQuota",
    "Plan",
    "RulesChange",
    "SpendCap",
    "Subscription",
    "group_plan_id",
    "parse_durations",
    "user_groups_field",
    "validate_cidr",
    "validate_durations",
    "validate_methods",
    "validate_rates",
]
