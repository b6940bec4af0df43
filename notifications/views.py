"""``GET /api/v1/notifications``: a subscription's own webhook endpoints and its latest deliveries.

Called with the subscription's API key (or by its signed-in user), like the usage API, and limited by the same
housekeeping throttle (:mod:`quotas.drf.housekeeping`): reading it spends nothing of the plan's limits.
Endpoints are created in the admin; their secrets are never shown here.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from quotas import api
from quotas.drf import api_problems
from quotas.drf.exceptions import drf_exception
from quotas.drf.housekeeping import USAGE_SCOPE, HousekeepingThrottle
from quotas.exceptions import ProblemException

from .models import Delivery, Endpoint

#: Deliveries listed, newest first.
LATEST = 50


def _iso(moment: Any) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


class NotificationsView(APIView):
    """The caller's endpoints and its :data:`LATEST` deliveries (webhooks and e-mails), newest first."""

    throttle_classes: list = [HousekeepingThrottle]
    throttle_scope = USAGE_SCOPE
    permission_classes: list = []  # a subscription reads its own; decided below
    renderer_classes = [JSONRenderer]

    def get_exception_handler(self) -> Any:
        return api_problems.exception_handler

    def get(self, request: Request) -> Response:
        try:
            client = api.identify(request._request, request.user, request.auth)
        except ProblemException as exc:
            raise drf_exception(exc) from None
        if client.kind == "ip":
            raise exceptions.NotAuthenticated()
        if client.kind != "subscription":
            raise exceptions.PermissionDenied("Notifications belong to a subscription: call with its API key.")
        subscription_id = int(client.ident)
        endpoints = Endpoint.objects.filter(subscription_id=subscription_id).order_by("pk")
        deliveries = (
            Delivery.objects.filter(event__subscription_id=subscription_id)
            .select_related("event", "endpoint", "contact")
            .order_by("-created_at", "-pk")[:LATEST]
        )
        return Response({
            "endpoints": [
                {"id": e.pk, "url": e.url, "events": e.events, "is_active": e.is_active,
                 "disabled_reason": e.disabled_reason or None, "created_at": _iso(e.created_at)}
                for e in endpoints
            ],
            "deliveries": [
                {"event": {"id": str(d.event_id), "type": d.event.type, "created": _iso(d.event.created_at)},
                 "to": d.endpoint.url if d.endpoint else d.contact.email if d.contact else None,
                 "status": d.status, "attempts": d.attempts, "response_status": d.response_status,
                 "last_attempt_at": _iso(d.last_attempt_at), "next_attempt_at": _iso(d.next_attempt_at),
                 "error": d.error or None}
                for d in deliveries
            ],
        })  # fmt: skip
