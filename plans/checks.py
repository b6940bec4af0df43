"""System checks of the plans app that read the database (``check --database default``, ``quota_doctor``)."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError

from quotas.rules.limits import drf_rates

#: What to do about quota_plans.W001.
DEFAULT_PLAN_HINT = (
    "Add a limit with neither scope, path prefix nor methods to the plan (e.g. 'global', 100/min), or make "
    "another plan the default."
)


def covers_every_request(plan: Any) -> bool:
    """Whether one of ``plan``'s limits applies to every request (no scope, path prefix or methods)."""
    if plan.limits.filter(scope="", path_prefix="", methods="", shadow=False).exists():
        return True
    return bool(plan.period_quotas.filter(scope="").exists())


def default_plan_warning(plan: Any) -> str:
    """What quota_plans.W001 says of ``plan`` (the admin says it too when such a plan is saved as the default)."""
    dropped = sorted(k for k in drf_rates() if k in ("anon", "user"))
    replaced = ""
    if dropped:
        named = " and ".join(repr(k) for k in dropped)
        replaced = f" REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'] {named} no longer apply to them."
    return (
        f"The default plan '{plan.slug}' has no limit for every request, so every view outside its scoped or "
        f"path limits is unlimited for anonymous clients and users without a subscription.{replaced}"
    )


@checks.register(checks.Tags.database)
def check_default_plan_covers_every_view(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """quota_plans.W001: the default plan has no limit for every request.

    Anonymous clients and users without a subscription are on the default plan, and a client on a plan gets
    the plan's limits, not DRF's rates. A default plan whose limits all name a scope, a path or methods leaves
    every other view unlimited for them: DRF's ``anon`` and ``user`` rates no longer apply.
    """
    if not databases:
        return []
    from .models import Plan

    try:
        plan = Plan.objects.filter(is_default=True).first()
        if plan is None or covers_every_request(plan):
            return []
    except DatabaseError:  # no tables yet (before migrate): nothing to say about plans
        return []
    return [checks.Warning(default_plan_warning(plan), hint=DEFAULT_PLAN_HINT, obj=plan, id="quota_plans.W001")]


@checks.register(checks.Tags.database)
def check_one_currency_per_plan(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list:
    """quota_plans.E002: a plan whose budgets (its own and its subscriptions') are in several currencies.

    A price is charged to every budget of the request as the same number, so amounts in two currencies would
    be mixed silently (1.00 charged to a JPY budget and to a EUR one), and upgrade offers could not compare them.
    """
    if not databases:
        return []
    from .models import CostBudget

    try:
        by_plan: dict[int, set[str]] = {}
        for plan_id, sub_plan_id, currency in CostBudget.objects.values_list(
            "plan_id", "subscription__plan_id", "currency"
        ):
            by_plan.setdefault(plan_id or sub_plan_id, set()).add(currency)
    except DatabaseError:
        return []
    return [
        checks.Error(
            f"Plan {plan_id} has budgets in several currencies ({', '.join(sorted(currencies))}); a plan has one.",
            hint="Change the budgets of the plan and of its subscriptions to one currency in the admin.",
            id="quota_plans.E002",
        )
        for plan_id, currencies in sorted(by_plan.items())
        if len(currencies) > 1
    ]
