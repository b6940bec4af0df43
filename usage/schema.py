"""The usage API's OpenAPI description (drf-spectacular), applied only when drf-spectacular is installed.

drf-spectacular is optional (the ``[openapi]`` extra), so the views do not
import it: :func:`documented` returns their ``extend_schema`` decorator, or
leaves the view as it is without drf-spectacular. Every error body is the
``Problem`` component (:class:`quotas.openapi.ProblemSerializer`), sent as
``application/problem+json``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def documented(operation: str) -> Callable[[F], F]:
    """The schema decorator of ``operation`` (``"usage_report"``, ``"usage_current"``, ``"usage_refusals"``)."""
    try:
        from drf_spectacular.utils import extend_schema
    except ImportError:
        return lambda view: view
    return extend_schema(**_SCHEMAS[operation]())


def _report() -> dict[str, Any]:
    from drf_spectacular.types import OpenApiTypes
    from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer

    from quotas.openapi import PROBLEM_MEDIA_TYPE, problem

    from .history import HISTORY_GROUPS
    from .reports import GROUPS
    from .serializers import ClientHistoryReportSerializer, HistoryReportSerializer, UsageReportSerializer

    report = PolymorphicProxySerializer(
        component_name="UsageReportResponse",
        serializers=[UsageReportSerializer, HistoryReportSerializer, ClientHistoryReportSerializer],
        resource_type_field_name=None,  # told apart by their required fields: one body matches one of them
    )

    return {
        "operation_id": "usage_report",
        "summary": "Usage per day or per scope",
        "description": (
            "Requests admitted and refused, weight and cost between two usage days (at most 366; days begin "
            "where budget days do, in QUOTAS['BUDGET_TIME_ZONE']), including "
            "today's not yet flushed counts. Callers see their own usage only; staff with the "
            "quota_usage.view_all_usage permission see everyone's. With group_by=minute or hour, the recent history "
            "instead: staff get it per plan and scope with the top clients; a client with a subscription (its "
            "API key) gets its own requests admitted and refused per minute or hour, for the last 24 hours."
        ),
        "parameters": [
            OpenApiParameter("from", OpenApiTypes.DATE, description="First day, YYYY-MM-DD (default: to - 29 days)."),
            OpenApiParameter(
                "to", OpenApiTypes.DATE, description="Last day, YYYY-MM-DD (default: today in BUDGET_TIME_ZONE)."
            ),
            OpenApiParameter(
                "group_by",
                OpenApiTypes.STR,
                enum=[*GROUPS, *HISTORY_GROUPS],
                description="Default: day. minute and hour: the recent history. Staff with quota_usage.view_all_usage: "
                "per plan and scope with the top clients, minute for the last 2 hours, hour for the last 7 days. "
                "A client with a subscription: its own, for the last 24 hours. Every mode's rows hold the same "
                "counters (allowed, denied, denied_by, shadow_would_deny, total, denial_rate, weight, cost).",
            ),
            OpenApiParameter(
                "start",
                OpenApiTypes.DATETIME,
                description="group_by=minute|hour: ISO 8601 start (default: as far back as kept; earlier is a 400).",
            ),
            OpenApiParameter(
                "end", OpenApiTypes.DATETIME, description="group_by=minute|hour: ISO 8601 end (default: now)."
            ),
            OpenApiParameter("top", OpenApiTypes.INT, description="Staff, group_by=minute|hour: top clients (0-100)."),
            OpenApiParameter(
                "client",
                OpenApiTypes.STR,
                description="Staff: one client's tag, e.g. s.12 (with group_by=minute|hour: that subscription's own "
                "history, as its key reads it). Others: their own.",
            ),
            OpenApiParameter("plan", OpenApiTypes.STR, description="Only usage under this plan (slug)."),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"], description="csv for spreadsheets."),
        ],
        "responses": {
            (200, "application/json"): report,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The rows, with a header line."),
            (400, PROBLEM_MEDIA_TYPE): problem("A bad parameter; `errors` names it."),
            **_errors(PROBLEM_MEDIA_TYPE, problem),
        },
        "tags": ["usage"],
    }


def _current() -> dict[str, Any]:
    from quotas.openapi import PROBLEM_MEDIA_TYPE, problem

    from .serializers import StandingSerializer

    return {
        "operation_id": "usage_current",
        "summary": "Live standing: every limit and budget that applies to the caller",
        "description": "What is left of each limit and budget right now, when it resets, and a bigger plan if useful.",
        "responses": {
            200: StandingSerializer,
            **_errors(PROBLEM_MEDIA_TYPE, problem),
            (503, PROBLEM_MEDIA_TYPE): problem("The quota store (Redis) cannot be reached right now."),
        },
        "tags": ["usage"],
    }


def _refusals() -> dict[str, Any]:
    from drf_spectacular.types import OpenApiTypes
    from drf_spectacular.utils import OpenApiParameter

    from quotas.openapi import PROBLEM_MEDIA_TYPE, problem

    from .serializers import RefusalsSerializer

    return {
        "operation_id": "usage_refusals",
        "summary": "A client's last refusals",
        "description": (
            "The client's last 20 refusals of the past 24 hours (at most one a second per server process), newest "
            "first: when, why, and each refusing limit's window, remaining, reset and retry-after at that moment. "
            "A caller reads its own (its tag as /api/v1/usage/current shows it); staff with the "
            "quota_usage.view_all_usage permission read anyone's."
        ),
        "parameters": [
            OpenApiParameter("client", OpenApiTypes.STR, required=True, description="A client tag, e.g. s.12."),
        ],
        "responses": {
            200: RefusalsSerializer,
            (400, PROBLEM_MEDIA_TYPE): problem("`client` is missing or is not a client tag."),
            **_errors(PROBLEM_MEDIA_TYPE, problem),
            (503, PROBLEM_MEDIA_TYPE): problem("The quota store (Redis) cannot be reached right now."),
        },
        "tags": ["usage"],
    }


def _errors(media_type: str, problem: Callable[[str], Any]) -> dict[Any, Any]:
    """The errors both operations share."""
    return {
        (401, media_type): problem("No API key and not signed in, or an invalid API key."),
        (403, media_type): problem("Asked for another client's usage."),
    }


_SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "usage_report": _report,
    "usage_current": _current,
    "usage_refusals": _refusals,
}
