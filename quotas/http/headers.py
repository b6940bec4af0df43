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

from quotas.conf import quota_settings

if TYPE_CHECKING:
    from quotas.engine.decision import Decision


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """The headers for ``decision`` (empty when no window is enforced).

    The X-RateLimit-* window is the one :meth:`Decision.most_restrictive` picks.
    """
    policy: list[str] = []
    current: list[str] = []
    for s in decision.states:
        window = s.window
        if not window.advertised:
            continue
        # While an adaptive multiplier is in force, the reduced quota is what is advertised.
        if s.quota == window.quota:
            policy.append(window.policy_item)
        else:
            policy.append(f"{window.policy_sf};q={s.quota};w={window.window}")
        if s.remaining is not None:
            current.append(f"{window.state_prefix}{max(0, s.remaining)};t={math.ceil(s.reset_us / 1e6)}")
    if not policy:
        return {}
    headers = {"RateLimit-Policy": ", ".join(policy)}
    if current:
        headers["RateLimit"] = ", ".join(current)
    top = decision.most_restrictive() if quota_settings.LEGACY_HEADERS else None
    if top is not None:
        headers["X-RateLimit-Limit"] = str(top.quota)
        headers["X-RateLimit-Remaining"] = str(max(0, top.remaining or 0))
        headers["X-RateLimit-Reset"] = str(math.ceil(decision.now + top.reset_us / 1e6))
    return headers
