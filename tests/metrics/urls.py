"""The project's URLs plus views that record one decision per request and say which worker served it."""

from __future__ import annotations

import os
import time

from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from rest_framework.request import Request
from rest_framework.response import Response

from demo.views import PingView
from quotas import metrics

TEST_PLAN = "metrics-test"


def record_decision(request: HttpRequest) -> JsonResponse:
    """Counts one allowed decision, marks this worker's engine mode, and says which process it is."""
    metrics.observe_decision(TEST_PLAN, "record", "allowed", "none", 0.0001)
    metrics.set_engine_mode("normal")
    time.sleep(0.005)  # long enough for concurrent requests to spread over the workers
    return JsonResponse({"pid": os.getpid()})


class PidPingView(PingView):
    """The demo's ping (decided by QuotaThrottle, recorded through the ledger), saying which process served it."""

    def get(self, request: Request) -> Response:
        return Response({"pid": os.getpid()})


urlpatterns = [
    path("", include("config.urls")),
    path("t/metrics/decision", record_decision),
    path("t/metrics/ping", PidPingView.as_view()),
]
