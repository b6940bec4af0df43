"""/healthz: is Redis reachable, and in which mode is the engine."""

from __future__ import annotations

import time

from django.http import HttpRequest, JsonResponse
from redis.exceptions import RedisError

from .conf import quota_settings
from .engine import get_engine


def healthz(request: HttpRequest) -> JsonResponse:
    """200 with ``{"status": "ok"}`` when Redis answers, else 503 with the failure mode."""
    engine = get_engine()
    started = time.perf_counter()
    try:
        engine.redis.ping()
        redis_ok, error = True, None
    except RedisError as exc:
        redis_ok, error = False, str(exc)
    body = {
        "status": "ok" if redis_ok else "degraded",
        "redis": {"reachable": redis_ok, "latency_ms": round((time.perf_counter() - started) * 1000, 2)},
        "engine": {
            "mode": "normal" if redis_ok else f"redis-down ({quota_settings.FAILURE_MODE})",
            "failure_mode": quota_settings.FAILURE_MODE,
        },
    }
    if error:
        body["redis"]["error"] = error
    return JsonResponse(body, status=200 if redis_ok else 503)
