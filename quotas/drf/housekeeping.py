"""The throttle of the platform's own housekeeping APIs (the usage API, the notifications API): reading one's
usage or one's webhooks is limited apart from the API it reports on.

:class:`HousekeepingThrottle` is the project's :class:`~quotas.drf.throttling.QuotaThrottle`
with three differences, so that a client at its API limit can still read
where it stands, and reading it costs nothing of what it reports:

* only the plan's limits whose scope is :data:`USAGE_SCOPE` apply (never the
  plan's other limits, its path limits or budgets); with none, the default
  rate ``QUOTAS['USAGE_API_RATE']`` (120 a minute) applies per client
  (``scope_limits_only``);
* its requests are not counted in the client's usage, the dashboard's
  history, nor toward the plan's bans (``metered = False``);
* they cost nothing (no budget or price applies).

Clients are counted as everywhere: by API key (its subscription), user, or
address; refusals are 429 problem+json with Retry-After and RateLimit
headers like any other limit's.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from quotas.drf.throttling import QuotaThrottle
from quotas.rules.limits import LimitRule, code_rate_algorithm, code_rule
from quotas.settings import quota_settings

#: The ``throttle_scope`` of the housekeeping views: a plan limit with this scope replaces the default rate.
USAGE_SCOPE = "usage_api"


class HousekeepingThrottle(QuotaThrottle):
    """Limits a housekeeping API by its own scope's limits, else ``QUOTAS['USAGE_API_RATE']`` (see the module)."""

    scope_limits_only = True
    metered = False

    def get_drf_limits(self, request: Request, view: Any) -> tuple[LimitRule, ...]:
        """The default rate, for a client whose plan names no limit of the scope (none when it is off)."""
        rate = quota_settings.USAGE_API_RATE
        return (code_rule(f"{USAGE_SCOPE}.default", USAGE_SCOPE, rate, code_rate_algorithm()),) if rate else ()

    def get_cost(self, request: Request, view: Any) -> int | None:
        """Nothing: reading one's usage or webhooks spends no budget and has no price."""
        return 0
