"""A client's live standing: every limit and budget that applies, and an upgrade offer.

Read with one EVALSHA in peek mode, which consumes and counts nothing. A client no plan covers is limited by
DRF's ``DEFAULT_THROTTLE_RATES`` (through ``QuotaThrottle``): its standing lists those.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from quotas.exceptions import InvalidRate
from quotas.formats.money import api_amount, from_micros
from quotas.identity.clients import Client
from quotas.rules.limits import LimitRule, drf_rates, drf_scope_rule
from quotas.rules.snapshot import PlanRules, RuleSet
from quotas.runtime import Runtime
from quotas.store.decision import WindowState, scaled

NEAR = 0.8  # an upgrade is offered from 80 % of a limit or budget used
#: DRF's rates that apply to every view (AnonRateThrottle's, UserRateThrottle's); any other names a throttle_scope.
WHOLE_API_RATES = ("anon", "user")


def current_standing(client: Client, rules: RuleSet, runtime: Runtime) -> dict[str, Any]:
    """Limits (quota in force, remaining, reset), budgets (spent, remaining, resets_at), plan, upgrade offer.

    A limit's ``quota`` is the one in force: the plan's (``plan_quota``) scaled by the adaptive ``multiplier``
    its plan has now, as the client's decisions are.
    """
    plan_id = client.subscriber.plan_id if client.subscriber else rules.default_plan_id
    plan = rules.plans.get(plan_id) if plan_id is not None else None
    if plan_id is not None:
        limits = rules.limits_for(plan_id, client.subscriber)
        scopes = {rule.id: rule.scope for rule in limits}
    else:  # as quotas.decide.hot_path._fallback_windows: no plan covers the client, DRF's rates limit it
        limits, scopes = drf_limits(anonymous=client.kind == "ip")
    windows = [w for rule in limits if not rule.shadow for w in rule.windows]
    multiplier = runtime.multipliers.get(plan_id)
    peeked = runtime.guard.peek(client.tag, windows, multiplier) if windows else None
    states = peeked.states if peeked is not None else []
    # The decision's own clock (Redis's, or an injected one): a budget's resets_at is then the end of the period
    # the ledger counts in, to the second, whatever this host's clock says.
    now = datetime.fromtimestamp(peeked.now if peeked is not None else runtime.clock.now(), UTC)
    body: dict[str, Any] = {
        "client": client.tag.strip("{}"),
        "plan": _plan(plan),
        "limits": [_limit(s, scopes, multiplier) for s in states if not s.window.is_budget],
        "budgets": [_budget(s, now) for s in states if s.window.is_budget],
        "upgrade": None,
    }
    near = [s for s in states if _used_fraction(s, multiplier) >= NEAR]
    for state in sorted(near, key=lambda s: _used_fraction(s, multiplier), reverse=True):
        upgrade = rules.upgrade_for(plan_id, state.window)
        if upgrade is not None:
            body["upgrade"] = {**(_plan(upgrade) or {}), "because": state.window.policy}
            break
    return body


def drf_limits(*, anonymous: bool) -> tuple[tuple[LimitRule, ...], dict[str, str]]:
    """The limits QuotaThrottle gives a client no plan covers, from ``DEFAULT_THROTTLE_RATES`` (the same rules,
    so the same counters), and each one's scope (limit id -> scope; "" for a rate of every view).

    Every rate that may apply: ``user`` (anonymous clients are counted by it too, as DRF's UserRateThrottle
    counts them by address), ``anon`` for an anonymous client only, and each ``throttle_scope``'s rate. A
    malformed rate is left out here (``check`` names it; quotas.checks).
    """
    rules, scopes = [], {}
    for scope in drf_rates():
        if scope == "anon" and not anonymous:
            continue
        try:
            rule = drf_scope_rule(str(scope))
        except InvalidRate:
            continue
        if rule is not None:
            rules.append(rule)
            scopes[rule.id] = "" if scope in WHOLE_API_RATES else str(scope)
    return tuple(rules), scopes


def _plan(plan: PlanRules | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {"slug": plan.slug, "name": plan.name, "monthly_price": api_amount(plan.price)}


def _used_fraction(state: WindowState, multiplier: float) -> float:
    quota = scaled(state.window, multiplier)
    return 0.0 if quota <= 0 else 1 - max(0, state.remaining or 0) / quota


def _limit(state: WindowState, scopes: dict[str, str], multiplier: float) -> dict[str, Any]:
    w = state.window
    scope = scopes.get(w.limit_id, "")
    return {
        "name": w.policy,
        "scope": scope or None,
        "algorithm": w.algorithm,
        "quota": scaled(w, multiplier),
        "plan_quota": w.quota,
        "multiplier": multiplier,
        "window": w.window,
        "period": w.period or None,
        "remaining": max(0, state.remaining or 0),
        "reset": math.ceil(state.reset_us / 1e6),
    }


def _budget(state: WindowState, now: datetime) -> dict[str, Any]:
    w = state.window
    remaining = max(0, state.remaining or 0)
    return {
        "name": w.policy,
        "period": w.period,
        "currency": w.currency,
        "amount": api_amount(from_micros(w.quota)),
        # As the script reports it: past the amount after an overshoot, never capped at it.
        # Committed spend, as the script reports it for a budget (a peek always asks Redis): 0 is 0, not "unknown",
        # so units an allowance holds are never shown as spent.
        "spent": api_amount(from_micros(state.used)),
        "remaining": api_amount(from_micros(remaining)),
        "resets_at": datetime.fromtimestamp(now.timestamp() + state.reset_us / 1e6, UTC)
        .replace(microsecond=0)
        .isoformat(),
    }
