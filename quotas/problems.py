"""RFC 9457 problem details: every error body the quota layer sends is built here (as a dict; framework-free).

:mod:`quotas.http.responses` turns a body into a Django response; the DRF adapter into a DRF exception.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from quotas.formats.money import from_micros
from quotas.rules.limits import SET_BY_CUSTOMER, SET_BY_KEY
from quotas.settings import quota_settings

if TYPE_CHECKING:
    from quotas.rules.limits import Window
    from quotas.rules.snapshot import PlanRules
    from quotas.store.decision import Decision

CONTENT_TYPE = "application/problem+json"
# Problem types registered by draft-ietf-httpapi-ratelimit-headers.
QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"
TEMPORARY_REDUCED_CAPACITY = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
ABNORMAL_USAGE = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"

#: Our own problem types, by slug: appended to QUOTAS['PROBLEM_TYPE_BASE'] ("Problem types" in
#: docs/responses.md documents each one).
OWN_TYPES = (
    "access-denied",
    "invalid-api-key",
    "request-out-of-bounds",
    "invalid-reported-cost",
    "query-too-complex",
    "query-not-weighed",
    "csrf-failed",
    "request-exceeds-budget",
    "shaping-unavailable",
    "too-many-failed-authentications",
    "rules-unavailable",
    "metrics-token-required",
    "metrics-not-configured",
    "invalid-usage-query",
    "not-authenticated",
    "forbidden",
)


def problem_type(slug: str) -> str:
    """The ``type`` URI of our own problem ``slug``: ``QUOTAS['PROBLEM_TYPE_BASE']`` + slug.

    Read at call time, so a changed setting applies at once.
    """
    return f"{quota_settings.PROBLEM_TYPE_BASE}{slug}"


_KEY_DETAIL = {
    "malformed": "The API key in the request is malformed: send the key you were issued, "
    "unchanged, in the X-API-Key header.",
    "unknown": "The API key in the request is not known. Check it, or ask for a new one.",
    "revoked": "The API key in the request has been revoked. Ask for a new one.",
    "expired": "The API key in the request has expired. Ask for a new one.",
}


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
        body["upgrade"] = {"plan": upgrade.slug, "name": upgrade.name, "monthly_price": str(upgrade.price)}
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
            f"({spent} of {amount} {window.currency} spent); it resets at {resets_at.isoformat()}."
        ),
        "reason": reason,
        "budget": {
            "name": window.policy,
            "period": window.period,
            "currency": window.currency,
            "amount": str(amount),
            "spent": str(spent),
            "requested": str(from_micros(decision.cost_micros)),
            "resets_at": resets_at.isoformat(),
        },
        "violated_policies": [s.window.policy for s in decision.denying_states()],
        "retry_after": retry,
    }
    if plan_slug:
        body["plan"] = plan_slug
    if upgrade is not None:
        body["upgrade"] = {"plan": upgrade.slug, "name": upgrade.name, "monthly_price": str(upgrade.price)}
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
            f"This request's estimated cost ({requested} {window.currency}) is more than the whole {period} budget "
            f"'{window.policy}' ({amount} {window.currency}): it can never be admitted under this budget, so "
            "retrying will not help. Send a smaller request, or move to a plan with a larger budget."
        ),
        "reason": "request_exceeds_budget",
        "budget": {
            "name": window.policy,
            "period": window.period,
            "currency": window.currency,
            "amount": str(amount),
            "requested": str(requested),
        },
        "violated_policies": [s.window.policy for s in decision.denying_states()],
    }
    if plan_slug:
        body["plan"] = plan_slug
    if upgrade is not None:
        body["upgrade"] = {"plan": upgrade.slug, "name": upgrade.name, "monthly_price": str(upgrade.price)}
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


def invalid_api_key(reason: str) -> dict[str, Any]:
    """The 401 body for a malformed, unknown or revoked API key."""
    return {
        "type": problem_type("invalid-api-key"),
        "title": "Invalid API key",
        "status": 401,
        "detail": _KEY_DETAIL[reason],
        "reason": f"api_key_{reason}",
    }


def out_of_bounds(what: str, value: object, maximum: object) -> dict[str, Any]:
    """The 400 body for a request whose weight or cost is out of bounds."""
    return {
        "type": problem_type("request-out-of-bounds"),
        "title": "Request out of bounds",
        "status": 400,
        "detail": f"This request would spend {what} {value}; a request may spend from 0 to {maximum}.",
        "reason": f"quota_{what}_out_of_bounds",
    }


def invalid_reported_cost(error: str) -> dict[str, Any]:
    """The 500 body for a view that reported an actual cost out of bounds (``error`` names the view and the
    value): the server's mistake, found after the view ran; the request is settled as a failed one."""
    return {
        "type": problem_type("invalid-reported-cost"),
        "title": "Invalid reported cost",
        "status": 500,
        "detail": f"The server could not account for this request: {error} It was not charged; this is a "
        "fault of the server, not of the request.",
        "reason": "invalid_reported_cost",
    }


def query_too_complex(complexity: int | None, maximum: int) -> dict[str, Any]:
    """The 400 body for a GraphQL query more complex than its endpoint allows (quotas.graphql); ``complexity``
    None: nested too deeply to be weighed."""
    weighed = (
        f"This query's complexity is {complexity}"
        if complexity is not None
        else "This query nests fields or fragments too deeply to be weighed"
    )
    return {
        "type": problem_type("query-too-complex"),
        "title": "Query too complex",
        "status": 400,
        "detail": f"{weighed}; this endpoint answers queries of complexity up to {maximum}. Select fewer fields, "
        "or nest them less deeply.",
        "reason": "query_too_complex",
        "complexity": complexity,
        "max_complexity": maximum,
    }


def query_too_large(bound: str, size: int | None, maximum: int) -> dict[str, Any]:
    """The 400 body for a GraphQL request refused before it was weighed (quotas.graphql): its documents are
    longer than ``GRAPHQL_MAX_QUERY_BYTES`` (``bound`` "bytes", ``size`` their length), or have more tokens than
    ``GRAPHQL_MAX_TOKENS`` (``bound`` "tokens", ``size`` None: the parse stopped at the first one too many).
    Its type is ``query-too-complex``: the same advice (send a smaller query), a ``reason`` of its own."""
    if bound == "bytes":
        found = f"This request's GraphQL documents are {size:,} bytes long"
        limit = f"refuses, unparsed, documents longer than {maximum:,} bytes (QUOTAS['GRAPHQL_MAX_QUERY_BYTES'])"
    else:
        found = f"This request's GraphQL documents have more than {maximum:,} tokens"
        limit = f"stops parsing documents at {maximum:,} tokens (QUOTAS['GRAPHQL_MAX_TOKENS'])"
    return {
        "type": problem_type("query-too-complex"),
        "title": "Query too complex",
        "status": 400,
        "detail": f"{found}; this endpoint {limit}. Send a shorter query.",
        "reason": "query_too_large",
        "bound": bound,
        "size": size,
        "maximum": maximum,
        "complexity": None,
    }


def query_not_weighed() -> dict[str, Any]:
    """The 400 body for a GraphQL operation its library was about to run although the quota gate had not weighed
    it (quotas.graphql: the library read the request otherwise than the gate did)."""
    return {
        "type": problem_type("query-not-weighed"),
        "title": "Query not weighed",
        "status": 400,
        "detail": "This endpoint was about to run a GraphQL operation other than the one this request was weighed "
        "by, so it ran nothing. Send the query and its operation name in one place: the JSON body, or the URL of "
        "a GET.",
        "reason": "query_not_weighed",
    }


def csrf_failed(reason: str) -> dict[str, Any]:
    """The 403 body for a GraphQL request of a signed-in browser that fails Django's CSRF check (quotas.graphql);
    ``reason`` is Django's (e.g. "CSRF token missing.")."""
    return {
        "type": problem_type("csrf-failed"),
        "title": "CSRF check failed",
        "status": 403,
        "detail": f"This request comes with a signed-in session and failed Django's CSRF check ({reason}), so "
        "nothing ran and nothing was counted. A browser sends its CSRF token (by default the csrftoken cookie's "
        "value) in the X-CSRFToken header; an API client sends its API key.",
        "reason": "csrf_failed",
        "csrf_reason": reason,
    }


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
