"""The usage API: ``GET /api/v1/usage/`` (a report), ``GET /api/v1/usage/current`` (live standing)
and ``GET /api/v1/usage/refusals?client=<tag>`` (a client's last refusals).

Who may see what: a client calling with its API key (or a signed-in user)
sees only its own usage, its own recent history with ``group_by=minute|hour``
(subscriptions only), and its own refusals (``client`` must then be its own tag,
as ``/current`` shows it); staff with the ``quota_usage.view_all_usage`` permission,
signed in with a session or basic auth, see every client's, filterable by
``client`` and ``plan``. These views have a throttle of their own
(:class:`usage.throttling.UsageAPIThrottle`): the plan's limits of scope
``usage_api``, else ``QUOTAS['USAGE_API_RATE']`` per client; never the
client's other limits, and not counted in its usage, so a client at its
limit can still read where it stands.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from typing import Any

from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from quotas import api
from quotas import problems as quota_problems
from quotas.api import Client
from quotas.drf import api_problems as problems
from quotas.drf.exceptions import drf_exception
from quotas.exceptions import ProblemException, QuotaServiceUnavailable, StoreUnavailable
from quotas.internal_api import STORE_ERRORS, is_client_tag
from quotas.settings import quota_settings

from .history import (
    HISTORY_GROUPS,
    NOT_FOR_CLIENTS,
    ClientHistoryQuerySerializer,
    HistoryQuerySerializer,
    build_client_history,
    build_history,
    has_client_history,
)
from .renderers import UsageCSVRenderer
from .reports import build_report
from .schema import documented
from .serializers import UsageQuerySerializer
from .throttling import USAGE_SCOPE, UsageAPIThrottle

logger = logging.getLogger(__name__)

#: Reading every client's usage, not only one's own (superusers have it).
VIEW_ALL_USAGE = "quota_usage.view_all_usage"


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
    user = request.user
    try:
        client = api.identify(request, user, request.auth)
    except ProblemException as exc:
        raise drf_exception(exc) from None
    if client.kind == "ip":
        raise exceptions.NotAuthenticated()
    has_key = client.kind == "subscription" and _sent_api_key(request)
    sees_all = bool(user and user.is_staff and user.has_perm(VIEW_ALL_USAGE)) and not has_key
    return Viewer(client, sees_all=sees_all)


def _sent_api_key(request: Request) -> bool:
    header = "HTTP_" + quota_settings.API_KEY_HEADER.upper().replace("-", "_")
    return header in request.META


class UsageAPIView(APIView):
    throttle_classes: list = [UsageAPIThrottle]  # see the module docstring
    throttle_scope = USAGE_SCOPE  # plan limits of this scope apply (quotas.drf.throttling.view_scope)
    permission_classes: list = []  # decided by viewer_for

    def get_exception_handler(self) -> Any:
        return problems.exception_handler


class UsageReportView(UsageAPIView):
    renderer_classes = [JSONRenderer, UsageCSVRenderer]

    @documented("usage_report")
    def get(self, request: Request) -> Response:
        viewer = viewer_for(request)
        if request.query_params.get("group_by") in HISTORY_GROUPS:
            return self.history(request, viewer)
        params = UsageQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        asked = params.validated_data.get("client")
        if not viewer.sees_all and asked not in (None, viewer.own):
            raise exceptions.PermissionDenied("You can read your own usage only.")
        query = params.query(None if viewer.sees_all else viewer.own)
        try:
            report = build_report(query)
            report["live"] = True
        except STORE_ERRORS:
            logger.warning("usage: Redis unavailable, report from flushed rows only", exc_info=True)
            report = build_report(query, live=False)
            report["live"] = False
        response = Response(report)
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = f'attachment; filename="{_filename(query.start, query.end)}"'
        return response

    def history(self, request: Request, viewer: Viewer) -> Response:
        """group_by=minute or hour: the engine's recent history for viewers who see every client, else the
        caller's own (subscriptions only: others have no per-client history)."""
        if not viewer.sees_all:
            return self.own_history(request, viewer)
        if "client" in request.query_params:  # one client's history, as that client reads it
            return self.client_history(request, request.query_params["client"].strip().strip("{}"))
        params = HistoryQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        try:
            body = build_history(params.validated_data)
        except STORE_ERRORS as exc:
            raise drf_exception(QuotaServiceUnavailable(quota_problems.store_unavailable())) from exc
        return self._history_response(request, body, params.validated_data)

    def own_history(self, request: Request, viewer: Viewer) -> Response:
        """The caller's own minutes or hours (admitted and refused), from its per-subscriber history."""
        if not has_client_history(viewer.own):
            raise exceptions.ValidationError({"group_by": NOT_FOR_CLIENTS})
        params = ClientHistoryQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        if params.validated_data.get("client", viewer.own) != viewer.own:
            raise exceptions.PermissionDenied("You can read your own usage only.")
        return self._client_history(request, params.validated_data, viewer.own)

    def client_history(self, request: Request, tag: str) -> Response:
        """For a viewer who sees every client: client ``tag``'s minutes or hours, as it reads them itself."""
        params = ClientHistoryQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        if not has_client_history(tag):
            raise exceptions.ValidationError(
                {"client": f"{tag} has no history of its own: it is kept per subscription (s.<id>)."}
            )
        return self._client_history(request, params.validated_data, tag)

    def _client_history(self, request: Request, params: dict[str, Any], tag: str) -> Response:
        try:
            body = build_client_history(params, tag)
        except STORE_ERRORS as exc:
            raise drf_exception(QuotaServiceUnavailable(quota_problems.store_unavailable())) from exc
        return self._history_response(request, body, params)

    def _history_response(self, request: Request, body: dict[str, Any], params: dict[str, Any]) -> Response:
        response = Response(body)
        if request.accepted_renderer.format == "csv":
            start, end = params["start"], params["end"]
            response["Content-Disposition"] = f'attachment; filename="history-{start:%Y%m%d%H%M}-{end:%Y%m%d%H%M}.csv"'
        return response


class CurrentUsageView(UsageAPIView):
    renderer_classes = [JSONRenderer]

    @documented("usage_current")
    def get(self, request: Request) -> Response:
        viewer = viewer_for(request)
        try:
            return Response(api.standing(viewer.client))
        except StoreUnavailable as exc:
            raise drf_exception(QuotaServiceUnavailable(quota_problems.store_unavailable())) from exc


class RefusalsView(UsageAPIView):
    renderer_classes = [JSONRenderer]

    @documented("usage_refusals")
    def get(self, request: Request) -> Response:
        viewer = viewer_for(request)
        asked = request.query_params.get("client", "")
        if not is_client_tag(asked):
            detail = "This field is required." if not asked else "Not a client tag (e.g. s.12, u.5, ip.192.0.2.1)."
            raise exceptions.ValidationError({"client": detail})
        asked = asked.strip("{}")
        if not viewer.sees_all and asked != viewer.own:
            raise exceptions.PermissionDenied("You can read your own refusals only.")
        try:
            records = api.last_refusals(asked)
        except STORE_ERRORS as exc:
            raise drf_exception(QuotaServiceUnavailable(quota_problems.store_unavailable())) from exc
        return Response({"client": asked, "refusals": records})


def _filename(start: date, end: date) -> str:
    return f"usage-{start:%Y%m%d}-{end:%Y%m%d}.csv"
