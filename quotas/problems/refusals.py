"""The bodies of a refused request: over a quota or a budget (429), denied by a list or banned (403), or not
decidable now (shaping full, too many failed authentications, Redis or the rules unavailable: 429 and 503)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from quotas.formats.money import api_amount, format_money, from_micros
from quotas.problems.types import ABNORMAL_USAGE, QUOTA_EXCEEDED, TEMPORARY_REDUCED_CAPACITY, problem_type
from quotas.rules.limits import SET_BY_CUSTOMER, SET_BY_KEY

if TYPE_CHECKING:
    from quotas.rules.limits import Window
    from quotas.rules.snapshot import PlanRules
    from quotas.store.decision import Decision


def per(seconds: int) -> str:
    """'per second', 'per 15 minutes', ... for a window length."""
    for unit, name in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        if seconds % unit == 0:
            n = seconds // unit
            return f"per {name}" if n == 1 else f"per {n} {name}s"
    return f"per {seconds} seconds"  # pragma: no cover - every window divides by 1


def span(window: Window) -> str:
    """What a window's quota is counted over, in words: 'per minute', 'per month', 'at once'.

    A concurrency window's length is a lease's lifetime, not a window, and a
    calendar period's length varies, so neither is given in seconds.
    """
    if window.algorithm == "concurrency":
        return "in flight at once"
    if window.period:
        return f"per {window.period.replace('_', ' ')}"
    return per(window.window)


def rate_limited(decision: Decision, upgrade: PlanRules | None, plan_slug: str | None) -> dict[str, Any]:
    """The 429 body: which limit denied, its quota and window, and when to retry."""
    state = decision.denying_state()
    window = state.window
    retry = decision.retry_after or 1
    noun = "unit" if decision.weighted(window) else "request"
    # The quota in force: the adaptive controller may have cut the plan's (then the body says so, and by how
    # much, as the 503 of a request refused only for that does).
    in_force = state.quota
    unit = noun if in_force == 1 else noun + "s"
    allows = f"allows {in_force} {unit} {span(window)}"
    if in_force != window.quota:
        allows = (
            f"allows {in_force} {unit} {span(window)} while the service is under load "
            f"(reduced from {window.quota}, a multiplier of {decision.multiplier:.2f})"
        )
    body: dict[str, Any] = {
        "type": QUOTA_EXCEEDED,
        "title": "Quota exceeded",
        "status": 429,
        "detail": f"The limit '{window.policy}' {allows}; retry in {retry} second{'' if retry == 1 else 's'}.",
        "reason": "rate_limited",
        "limit": {
            "name": window.policy,
            "quota": in_force,
            "window": window.window,
            "algorithm": window.algorithm,
            "remaining": state.remaining,
        },
        "violated_policies": [s.window.policy for s in decision.denying_states()],
        "retry_after": retry,
    }
    if in_force != window.quota:
        body["limit"].update(full_quota=window.quota, reduced=True)
        body["multiplier"] = decision.multiplier
    if state.retry_us is None:
        body["detail"] = (
            f"This request costs more than the limit '{window.policy}' can ever allow ({in_force} {span(window)})."
        )
    if plan_slug:
        body["plan"] = plan_slug
    if upgrade is not None:
        body["upgrade"] = {"plan": upgrade.slug, "name": upgrade.name, "monthly_price": api_amount(upgrade.price)}
    return body


def budget_exceeded(decision: Decision, upgrade: PlanRules | None, plan_slug: str | None) -> dict[str, Any]:
    """The 429 body for a request its budget cannot pay for: which budget, spent, amount, reset. A cap the
    customer set (on its subscription or on one key) is named as such, with a reason of its own: its owners, not
    the plan, can lift it."""
    state = decision.denying_state()
    window = state.window
    retry = decision.retry_after or 1
    # What the period has used, as the script reports it: past the amount after an overshoot (reconciliation
    # may add more than was estimated), never capped at it.
    spent = from_micros(state.used if state.used else window.quota - max(0, state.remaining or 0))
    amount = from_micros(window.quota)
    resets_at = datetime.fromtimestamp(decision.now + state.reset_us / 1e6, UTC).replace(microsecond=0)
    title, what, reason = _BUDGET_REFUSALS[window.set_by]
    body: dict[str, Any] = {
        "type": QUOTA_EXCEEDED,
        "title": title,
        "status": 429,
        "detail": (
            f"This request would exceed the {window.period.replace('_', ' ')} {what} '{window.policy}' "
            f"({format_money(spent, window.currency)} of {format_money(amount, window.currency)} spent); it resets "
            f"at {resets_at.isoformat()}."
        ),
        "reason": reason,
        "budget": {
            "name": window.policy,
            "period": window.period,
            "currency": window.currency,
            "amount": api_amount(amount),
            "spent": api_amount(spent),
            "requested": api_amount(from_micros(decision.cost_micros)),
            "resets_at": resets_at.isoformat(),
        },
        "violated_policies": [s.window.policy for s in decision.denying_states()],
        "retry_after": retry,
    }
    if plan_slug:
        body["plan"] = plan_slug
    if upgrade is not None:
        body["upgrade"] = {"plan": upgrade.slug, "name": upgrade.name, "monthly_price": api_amount(upgrade.price)}
    return body


#: (title, what the detail calls it, reason) of a money window's refusal, by who set the window.
_BUDGET_REFUSALS = {
    "": ("Budget exceeded", "budget", "budget_exceeded"),
    SET_BY_CUSTOMER: ("Spending cap reached", "spending cap your account set", "spend_cap_reached"),
    SET_BY_KEY: ("Key's spending cap reached", "spending cap of this API key", "key_cap_reached"),
}


def request_exceeds_budget(decision: Decision, upgrade: PlanRules | None, plan_slug: str | None) -> dict[str, Any]:
    """The 429 body for a request whose estimated cost is more than its budget's whole amount.

    Waiting cannot help, so there is no ``retry_after`` (and no Retry-After): a smaller request, or a plan with
    a larger budget (``upgrade``), can.
    """
    state = decision.denying_state()
    window = state.window
    amount = from_micros(window.quota)
    requested = from_micros(decision.cost_micros)
    period = window.period.replace("_", " ")
    body: dict[str, Any] = {
        "type": problem_type("request-exceeds-budget"),
        "title": "Request exceeds the budget",
        "status": 429,
        "detail": (
            f"This request's estimated cost ({format_money(requested, window.currency)}) is more than the whole "
            f"{period} budget '{window.policy}' ({format_money(amount, window.currency)}): it can never be admitted "
            "under this budget, so retrying will not help. Send a smaller request, or move to a plan with a larger "
            "budget."
        ),
        "reason": "request_exceeds_budget",
        "budget": {
            "name": window.policy,
            "period": window.period,
            "currency": window.currency,
            "amount": api_amount(amount),
            "requested": api_amount(requested),
        },
        "violated_policies": [s.window.policy for s in decision.denying_states()],
    }
    if plan_slug:
        body["plan"] = plan_slug
    if upgrade is not None:
        body["upgrade"] = {"plan": upgrade.slug, "name": upgrade.name, "monthly_price": api_amount(upgrade.price)}
    return body


def banned(decision: Decision, plan_slug: str | None) -> dict[str, Any]:
    """The 429 body for a client banned after too many refusals (escalation)."""
    retry = decision.ban_retry_after
    body: dict[str, Any] = {
        "type": ABNORMAL_USAGE,
        "title": "Temporarily blocked",
        "status": 429,
        "detail": (
            f"Too many requests were refused in a short time, so this client is blocked for {retry} more "
            f"second{'' if retry == 1 else 's'}. Repeated blocks last longer; slow down and back off."
        ),
        "reason": "banned",
        "retry_after": retry,
    }
    if plan_slug:
        body["plan"] = plan_slug
    return body


def reduced_capacity(decision: Decision) -> dict[str, Any]:
    """The 503 body for a request refused only because limits are reduced under load."""
    state = decision.denying_state()
    retry = decision.retry_after or 1
    return {
        "type": TEMPORARY_REDUCED_CAPACITY,
        "title": "Temporarily reduced capacity",
        "status": 503,
        "detail": (
            f"The service is under load and has reduced '{state.window.policy}' to {state.quota} of "
            f"{state.window.quota} requests {per(state.window.window)}; retry in {retry} second"
            f"{'' if retry == 1 else 's'}."
        ),
        "reason": "reduced_capacity",
        "limit": {
            "name": state.window.policy,
            "quota": state.quota,
            "full_quota": state.window.quota,
            "window": state.window.window,
        },
        "multiplier": decision.multiplier,
        "retry_after": retry,
    }


def access_denied(entry: Any, now: float) -> dict[str, Any]:
    """The 403 body for a deny-list entry; Retry-After only when the entry expires."""
    body: dict[str, Any] = {
        "type": problem_type("access-denied"),
        "title": "Access denied",
        "status": 403,
        "detail": f"This client may not use this API{' here' if entry.scope else ''}: {entry.reason}"
        if entry.reason
        else f"This client may not use this API{' here' if entry.scope else ''}.",
        "reason": "acl_denied",
    }
    if entry.expires_at:
        body["retry_after"] = max(1, math.ceil(entry.expires_at - now))
        body["expires_at"] = datetime.fromtimestamp(entry.expires_at, UTC).replace(microsecond=0).isoformat()
    return body


def shaping_unavailable(retry_after: int) -> dict[str, Any]:
    """The 429 body for a request a shaping limit admitted but this server has no room to delay."""
    return {
        "type": problem_type("shaping-unavailable"),
        "title": "Too many delayed requests",
        "status": 429,
        "detail": "The request is within its limits but would have to wait its turn, and this server is already "
        f"holding as many delayed requests as it may. Retry in {retry_after} s.",
        "reason": "shaping_capacity",
        "retry_after": retry_after,
    }


def auth_throttled(retry_after: int) -> dict[str, Any]:
    """The 429 body for a client over its limit of failed authentications."""
    return {
        "type": problem_type("too-many-failed-authentications"),
        "title": "Too many failed authentications",
        "status": 429,
        "detail": "Too many attempts with wrong credentials came from this address or for this user. "
        f"Every attempt is refused for {retry_after} s; then check the credentials before trying again.",
        "reason": "failed_authentications",
        "retry_after": retry_after,
    }


def store_unavailable() -> dict[str, Any]:
    """The 503 body sent in ``closed`` failure mode while Redis is unreachable."""
    return {
        "type": TEMPORARY_REDUCED_CAPACITY,
        "title": "Service temporarily unavailable",
        "status": 503,
        "detail": "Quotas cannot be checked right now, so requests are refused. Retry shortly.",
        "reason": "quota_store_unavailable",
        "retry_after": 1,
    }


def rules_unavailable(retry_after: int) -> dict[str, Any]:
    """The 503 body for a request that needs rules the database cannot give right now."""
    return {
        "type": problem_type("rules-unavailable"),
        "title": "Service temporarily unavailable",
        "status": 503,
        "detail": "The plans and API keys this request is checked against cannot be read right now. "
        f"Retry in {retry_after} s.",
        "reason": "rules_unavailable",
        "retry_after": retry_after,
    }
