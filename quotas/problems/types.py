"""The problem bodies' content type and ``type`` URIs: the types the rate-limit headers draft registers, and our
own, each a slug under ``QUOTAS['PROBLEM_TYPE_BASE']``."""

from __future__ import annotations

from quotas.settings import quota_settings

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
