"""RFC 9457 problem details: every error body the quota layer sends is built here (as a dict; framework-free).

:mod:`quotas.http.responses` turns a body into a Django response; the DRF adapter into a DRF exception. The
bodies are kept by what they answer: :mod:`~quotas.problems.types` (the content type and every ``type`` URI),
:mod:`~quotas.problems.refusals` (a request refused by its quota, a list or a ban, or that cannot be decided now)
and :mod:`~quotas.problems.bad_requests` (a request, or a view's report, the engine cannot take as it is). Every
front door calls them as ``problems.<name>``, this package's names.
"""

from quotas.problems.bad_requests import (
    csrf_failed,
    invalid_api_key,
    invalid_reported_cost,
    out_of_bounds,
    query_not_weighed,
    query_too_complex,
    query_too_large,
)
from quotas.problems.refusals import (
    access_denied,
    auth_throttled,
    banned,
    budget_exceeded,
    per,
    rate_limited,
    reduced_capacity,
    request_exceeds_budget,
    rules_unavailable,
    shaping_unavailable,
    span,
    store_unavailable,
)
from quotas.problems.types import (
    ABNORMAL_USAGE,
    CONTENT_TYPE,
    OWN_TYPES,
    QUOTA_EXCEEDED,
    TEMPORARY_REDUCED_CAPACITY,
    problem_type,
)

__all__ = [
    "ABNORMAL_USAGE", "CONTENT_TYPE", "OWN_TYPES", "QUOTA_EXCEEDED", "TEMPORARY_REDUCED_CAPACITY", "access_denied",
    "auth_throttled", "banned", "budget_exceeded", "csrf_failed", "invalid_api_key", "invalid_reported_cost",
    "out_of_bounds", "per", "problem_type", "query_not_weighed", "query_too_complex", "query_too_large",
    "rate_limited", "reduced_capacity", "request_exceeds_budget", "rules_unavailable", "shaping_unavailable", "span",
    "store_unavailable",
]  # fmt: skip
