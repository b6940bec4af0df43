"""Rate-limit response headers, all built here.

- ``RateLimit-Policy`` and ``RateLimit``: draft-ietf-httpapi-ratelimit-headers
  (-10), structured-field lists with one item per enforced window:
  ``RateLimit-Policy: "search";q=10;w=60`` and ``RateLimit: "search";r=3;t=42``,
  where ``t`` is the seconds until that window's full quota is back.
- ``X-RateLimit-Limit/Remaining/Reset`` (Reset as epoch seconds) for the most
  restrictive window, for clients written against GitHub-style headers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .conf import quota_settings

if TYPE_CHECKING:
    from .decision import Decision


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """The headers for ``decision`` (empty when no window is enforced).

    The X-RateLimit-* window is the one :meth:`Decision.most_restrictive`
    picks; it is found here in the same pass over the states as the other
    headers, as this runs on every response of a throttled view.
    """
    legacy = quota_settings.LEGACY_HEADERS
    policy: list[str] = []
    current: list[str] = []
    denied = least = None
    denied_wait: float = 0
    least_key: tuple[float, int] = (0.0, 0)
    for s in decision.states:
        window = s.window
        if not window.advertised:
            continue
        quota = s.quota
        # While an adaptive multiplier is in force, the reduced quota is what is advertised.
        if quota == window.quota:
            policy.append(window.policy_item)
        else:
            policy.append(f"{window.policy_sf};q={quota};w={window.window}")
        remaining = s.remaining
        if remaining is not None:
            current.append(f"{window.state_prefix}{max(0, remaining)};t={math.ceil(s.reset_us / 1e6)}")
        if not legacy:
            continue
        # Ties keep the first state, as max() and min() do in Decision.most_restrictive.
        if not s.ok:
            wait = math.inf if s.retry_us is None else s.retry_us
            if denied is None or wait > denied_wait:
                denied, denied_wait = s, wait
        elif denied is None and remaining is not None:
            key = (remaining / max(quota, 1), -s.reset_us)
            if least is None or key < least_key:
                least, least_key = s, key
    if not policy:
        return {}
    headers = {"RateLimit-Policy": ", ".join(policy)}
    if current:
        headers["RateLimit"] = ", ".join(current)
    top = denied if denied is not None else least
    if top is not None:
        headers["X-RateLimit-Limit"] = str(top.quota)
        headers["X-RateLimit-Remaining"] = str(max(0, top.remaining or 0))
        headers["X-RateLimit-Reset"] = str(math.ceil(decision.now + top.reset_us / 1e6))
    return headers
