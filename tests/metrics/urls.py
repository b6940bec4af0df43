"""The project's URLs plus a view that records one decision per request, in whichever worker serves it."""

from __future__ import annotations

import os
import time

from django.http import HttpRequest, JsonResponse
from django.urls import include, path

from quotas import metrics

TEST_PLAN = "metrics-test"


def record_decision(request: HttpRequest) -> JsonResponse:
    """Counts one allowed decision, marks this worker's engine mode, and says which process it is."""
    metrics.observe_decision(TEST_PLAN, "record", "allowed", "none", 0.0001)
    metrics.set_engine_mode("normal")
    time.sleep(0.005)  # long enough for concurrent requests to spread over the workers
    return JsonResponse({"pid": os.getpid()})


urlpatterns = [
    path("", include("config.urls")),
    path("t/metrics/decision", record_decision),
]
