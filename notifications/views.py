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

from .schema import documented
from .summary import LATEST, summary


class NotificationsView(APIView):
    """The caller's endpoints and its latest deliveries (webhooks and e-mails), newest first
    (:func:`notifications.summary.summary`)."""

    throttle_classes: list = [HousekeepingThrottle]
    throttle_scope = USAGE_SCOPE
    permission_classes: list = []  # a subscription reads its own; decided below
    renderer_classes = [JSONRenderer]

    def get_exception_handler(self) -> Any:
        return api_problems.exception_handler

    @documented
    def get(self, request: Request) -> Response:
        try:
            client = api.identify(request, request.user, request.auth)
        except ProblemException as exc:
            raise drf_exception(exc) from None
        if client.kind == "ip":
            raise exceptions.NotAuthenticated()
        if client.kind != "subscription":
            raise exceptions.PermissionDenied("Notifications belong to a subscription: call with its API key.")
        return Response(summary(int(client.ident), LATEST))
