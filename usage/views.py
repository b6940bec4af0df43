"""The usage API: ``GET /api/v1/usage/`` (a report) and ``GET /api/v1/usage/current`` (live standing).

Who may see what: a client calling with its API key (or a signed-in user)
sees only its own usage; staff with the ``usage.view_all_usage`` permission,
signed in with a session or basic auth, see every client's, filterable by
``client`` and ``plan``. These views are not counted or limited by QuotaThrottle, so a
client at its limit can still read where it stands.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.utils import timezone
from rest_framework import exceptions, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from quotas.conf import quota_settings
from quotas.engine.redis_connect import STORE_ERRORS
from quotas.engine.runtime import get_engine
from quotas.engine.standing import current_standing
from quotas.exceptions import QuotaServiceUnavailable, StoreUnavailable
from quotas.http import problems as quota_problems
from quotas.identity.clients import Client, identify

from . import problems
from .renderers import UsageCSVRenderer
from .reports import GROUPS, build_report
from .serializers import StandingSerializer, UsageQuerySerializer, UsageReportSerializer

try:
    from drf_spectacular.types import OpenApiTypes
    from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
except ImportError:  # no [openapi] extra: the same answers, only without their schema description
    from .schema_stubs import OpenApiParameter, OpenApiResponse, OpenApiTypes, extend_schema, inline_serializer  # type: ignore[assignment]

logger = logging.getLogger(__name__)

PROBLEM = inline_serializer(
    "Problem",
    {
        "type": serializers.CharField(),
        "title": serializers.CharField(),
        "status": serializers.IntegerField(),
        "detail": serializers.CharField(),
        "errors": serializers.DictField(child=serializers.CharField(), required=False),
    },
)
PROBLEM_RESPONSES = {
    401: OpenApiResponse(PROBLEM, description="No API key and not signed in, or an invalid API key."),
    403: OpenApiResponse(PROBLEM, description="Asked for another client's usage."),
}
API_KEY = OpenApiParameter(
    "X-API-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="Your API key (else sign in: staff holding usage.view_all_usage see every client).",
)


#: Reading every client's usage, not only one's own (superusers have it).
VIEW_ALL_USAGE = "usage.view_all_usage"


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is asking: their own client, and whether they may see every client."""

    client: Client
    sees_all: bool

    @property
    def own(self) -> str:
        return self.client.tag.strip("{}")


def viewer_for(request: Request) -> Viewer:
    """The caller; raises InvalidAPIKey (401) for a bad key, NotAuthenticated without credentials."""
    engine = get_engine()
    user = request.user
    client = identify(request._request, user, engine.rules, request.auth)
    if client.kind == "ip":
        raise exceptions.NotAuthenticated()
    has_key = client.kind == "subscription" and _sent_api_key(request)
    sees_all = bool(user and user.is_staff and user.has_perm(VIEW_ALL_USAGE)) and not has_key
    return Viewer(client, sees_all=sees_all)


def _sent_api_key(request: Request) -> bool:
    header = "HTTP_" + quota_settings.API_KEY_HEADER.upper().replace("-", "_")
    return header in request._request.META


class UsageAPIView(APIView):
    throttle_classes: list = []  # see the module docstring
    permission_classes: list = []  # decided by viewer_for

    def get_exception_handler(self) -> Any:
        return problems.exception_handler


class UsageReportView(UsageAPIView):
    renderer_classes = [JSONRenderer, UsageCSVRenderer]

    @extend_schema(
        operation_id="usage_report",
        summary="Usage per day or per scope",
        description=(
            "Requests admitted and refused, weight and cost between two UTC days (at most 366), including "
            "today's not yet flushed counts. Callers see their own usage only; staff with the "
            "usage.view_all_usage permission see everyone's."
        ),
        parameters=[
            API_KEY,
            OpenApiParameter("from", OpenApiTypes.DATE, description="First day, YYYY-MM-DD (default: to - 29 days)."),
            OpenApiParameter("to", OpenApiTypes.DATE, description="Last day, YYYY-MM-DD (default: today, UTC)."),
            OpenApiParameter("group_by", OpenApiTypes.STR, enum=list(GROUPS), description="Default: day."),
            OpenApiParameter("client", OpenApiTypes.STR, description="Staff: one client's tag, e.g. s.12."),
            OpenApiParameter("plan", OpenApiTypes.STR, description="Only usage under this plan (slug)."),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"], description="csv for spreadsheets."),
        ],
        responses={
            (200, "application/json"): UsageReportSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The rows, with a header line."),
            400: OpenApiResponse(PROBLEM, description="A bad parameter; `errors` names it."),
            **PROBLEM_RESPONSES,
        },
        tags=["usage"],
    )
    def get(self, request: Request) -> Response:
        viewer = viewer_for(request)
        params = UsageQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        asked = params.validated_data.get("client")
        if not viewer.sees_all and asked not in (None, viewer.own):
            raise exceptions.PermissionDenied("You can read your own usage only.")
        query = params.query(None if viewer.sees_all else viewer.own)
        try:
            report = build_report(query, get_engine().redis)
            report["live"] = True
        except STORE_ERRORS:
            logger.warning("usage: Redis unavailable, report from flushed rows only", exc_info=True)
            report = build_report(query, None, today=timezone.now().date())
            report["live"] = False
        response = Response(report)
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = f'attachment; filename="{_filename(query.start, query.end)}"'
        return response


class CurrentUsageView(UsageAPIView):
    renderer_classes = [JSONRenderer]

    @extend_schema(
        operation_id="usage_current",
        summary="Live standing: every limit and budget that applies to the caller",
        description="What is left of each limit and budget right now, when it resets, and a bigger plan if useful.",
        parameters=[API_KEY],
        responses={200: StandingSerializer, **PROBLEM_RESPONSES},
        tags=["usage"],
    )
    def get(self, request: Request) -> Response:
        viewer = viewer_for(request)
        engine = get_engine()
        try:
            return Response(current_standing(viewer.client, engine.rules.current(), engine))
        except StoreUnavailable as exc:
            raise QuotaServiceUnavailable(quota_problems.store_unavailable()) from exc


def _filename(start: date, end: date) -> str:
    return f"usage-{start:%Y%m%d}-{end:%Y%m%d}.csv"
