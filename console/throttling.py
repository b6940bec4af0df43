"""The self-service API's own rate limit: the housekeeping throttle (never the plan's other limits, never
counted in usage, no cost) with a scope and a default rate of its own, so managing keys and reading usage do
not share one allowance."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from quotas.drf.housekeeping import HousekeepingThrottle
from quotas.rules.limits import LimitRule, code_rate_algorithm, code_rule

from .conf import console_settings

#: The views' ``throttle_scope``: a plan limit of this scope replaces ``QUOTAS['CONSOLE']['API_RATE']``.
CONSOLE_SCOPE = "console_api"


class ConsoleThrottle(HousekeepingThrottle):
    """Limits the self-service API by the plan's ``console_api`` limits, else ``QUOTAS['CONSOLE']['API_RATE']``."""

    def get_drf_limits(self, request: Request, view: Any) -> tuple[LimitRule, ...]:
        rate = console_settings.API_RATE
        return (code_rule(f"{CONSOLE_SCOPE}.default", CONSOLE_SCOPE, rate, code_rate_algorithm()),) if rate else ()
