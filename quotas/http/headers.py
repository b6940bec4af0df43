"""Rate-limit response headers, all built here.

- ``RateLimit-Policy`` and ``RateLimit``: draft-ietf-httpapi-ratelimit-headers
  (-10), structured-field lists with one item per enforced window:
  ``RateLimit-Policy: "search";q=10;w=60`` and ``RateLimit: "search";r=3;t=42``,
  where ``t`` is the seconds until that window's full quota is back.

  * ``q`` is always the window's full quota: the policy stays the same over a
    sequence of responses (the draft's SHOULD), also while an adaptive
    multiplier reduces it; the reduction shows in ``r`` (and in the 503 body).
  * ``w`` only for a real window of fixed length (the rolling and aligned
    rate algorithms). A concurrency limit has no window (its length is a
    lease's lifetime) and a calendar period's length varies (a month is 28 to
    31 days; a day in a time zone with summer time 23 to 25 hours), so
    neither gets one; a period names itself in ``quotas-period`` instead.
  * ``qu`` (quota unit) for units other than requests: ``"concurrent-requests"``
    for a concurrency limit. A window counting weight units (a period quota,
    or any request taking other than one unit) says ``qu="requests"``: the
    closest registered unit (the draft leaves how many units a request
    consumes to the implementation) and, unlike an unregistered value, one
    every client may accept. The units this request took are in the
    vendor-prefixed ``quotas-weight`` parameter of its ``RateLimit`` item.

  The texts that never change for a window (its policy item, the start of its
  ``RateLimit`` item) are compiled with it, once per rules snapshot
  (:class:`quotas.rules.limits.Window`).

- ``X-RateLimit-Limit/Remaining/Reset`` (Reset as epoch seconds) for the most
  restrictive window, for clients written against GitHub-style headers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from quotas.settings import quota_settings

if TYPE_CHECKING:
    from quotas.store.decision import Decision, WindowState


def policy_item(state: WindowState, decision: Decision) -> str:
    """The window's ``RateLimit-Policy`` item: its full quota, unit and window (compiled with the window)."""
    window = state.window
    return window.policy_item_units if decision.weighted(window) else window.policy_item


def state_item(state: WindowState, decision: Decision) -> str:
    """The window's ``RateLimit`` item: what remains of it, and when more is back."""
    window = state.window
    remaining = state.remaining or 0
    item = f"{window.state_prefix}{remaining if remaining > 0 else 0}"
    if window.algorithm != "concurrency":
        item += f";t={math.ceil(state.reset_us / 1e6)}"
    elif not state.ok and state.retry_us is not None:
        # Leases come back when requests end, at no known time: ``t`` only on a refusal,
        # where it is the Retry-After hint (the draft: Retry-After not before ``t``).
        item += f";t={math.ceil(state.retry_us / 1e6)}"
    if decision.weighted(window):
        item += f";quotas-weight={decision.units(window)}"
    return item


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """The headers for ``decision`` (empty when no window is enforced).

    The X-RateLimit-* window is the one :meth:`Decision.most_restrictive` picks.
    """
    if decision.allowed is False and refused_by_budget_alone(decision):
        # Its headers would describe rate windows that admitted it, with room left: a client would retry at
        # once. A budget counts money and has no item; Retry-After (its reset) and the body describe it.
        return {}
    policy: list[str] = []
    current: list[str] = []
    for s in decision.states:
        if not s.window.advertised:
            continue
        policy.append(policy_item(s, decision))
        if s.remaining is not None:
            current.append(state_item(s, decision))
    if not policy:
        return {}
    headers = {"RateLimit-Policy": ", ".join(policy)}
    if current:
        headers["RateLimit"] = ", ".join(current)
    top = decision.most_restrictive() if quota_settings.LEGACY_HEADERS else None
    if top is not None:
        remaining = top.remaining or 0
        headers["X-RateLimit-Limit"] = str(top.quota)
        headers["X-RateLimit-Remaining"] = str(remaining if remaining > 0 else 0)
        headers["X-RateLimit-Reset"] = str(math.ceil(decision.now + top.reset_us / 1e6))
    return headers


def refused_by_budget_alone(decision: Decision) -> bool:
    """Whether ``decision`` was refused by money budgets and by no window that headers describe (nor a ban)."""
    if decision.banned or decision.ban_started:
        return False
    denying = decision.denying_states()
    return bool(denying) and not any(s.window.advertised for s in denying)
