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
    """The headers for ``decision`` (empty when no window is enforced)."""
    states = [s for s in decision.states if not s.window.shadow and not s.window.is_budget]
    if not states:
        return {}
    # While an adaptive multiplier is in force, the reduced quota is what is advertised.
    policy = ", ".join(f"{s.window.policy_sf};q={s.quota};w={s.window.window}" for s in states)
    current = ", ".join(
        f"{s.window.policy_sf};r={max(0, s.remaining)};t={math.ceil(s.reset_us / 1e6)}"
        for s in states
        if s.remaining is not None
    )
    headers = {"RateLimit-Policy": policy}
    if current:
        headers["RateLimit"] = current
    if quota_settings.LEGACY_HEADERS:
        top = decision.most_restrictive()
        if top is not None:
            headers["X-RateLimit-Limit"] = str(top.quota)
            headers["X-RateLimit-Remaining"] = str(max(0, top.remaining or 0))
            headers["X-RateLimit-Reset"] = str(math.ceil(decision.now + top.reset_us / 1e6))
    return headers
