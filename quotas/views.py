"""/healthz: is Redis reachable, and in which mode is the engine; /metrics: Prometheus exposition."""

from __future__ import annotations

import hmac
import ipaddress
import os
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from .conf import quota_settings
from .engine import get_engine
from .metrics import exposition
from .store import STORE_ERRORS, describe


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when Redis answers, else 503; says how this process decides right now.

    ``engine.mode`` is ``normal``, or while Redis is down (the circuit breaker
    open) ``fallback`` (failure mode local), ``fail-open`` or ``fail-closed``.
    """
    engine = get_engine()
    started = time.perf_counter()
    try:
        engine.redis.ping()
        redis_ok, error = True, None
    except STORE_ERRORS as exc:
        redis_ok, error = False, str(exc)
    if redis_ok and not engine.breaker.is_open:
        mode = "normal"
    else:
        mode = {"local": "fallback", "open": "fail-open", "closed": "fail-closed"}[quota_settings.FAILURE_MODE]
    body = {
        "status": "ok" if redis_ok else "degraded",
        "redis": {
            "reachable": redis_ok,
            "topology": describe(quota_settings.REDIS_URL),
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        },
        "engine": {
            "mode": mode,
            "failure_mode": quota_settings.FAILURE_MODE,
            "breaker_open": engine.breaker.is_open,
            "usage_held_in_process": bool(engine.usage_buffer),
        },
    }
    if error:
        body["redis"]["error"] = error
    return JsonResponse(body, status=200 if redis_ok else 503)


def metrics_token() -> str:
    """The scrape token: ``settings.METRICS_TOKEN``, else the ``METRICS_TOKEN`` environment variable, else ""."""
    return getattr(settings, "METRICS_TOKEN", None) or os.environ.get("METRICS_TOKEN", "")


def from_loopback(request: HttpRequest) -> bool:
    """Whether the peer is this machine and no proxy relayed the request (a local proxy would look local)."""
    if "HTTP_X_FORWARDED_FOR" in request.META or "HTTP_FORWARDED" in request.META:
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics of every process (see :mod:`quotas.metrics`).

    Staff users signed in to the admin may always read them. Otherwise, with
    a token configured, ``Authorization: Bearer <token>`` is required (401
    without it); with none, only loopback peers are served (403 for others).
    """
    user = getattr(request, "user", None)
    if not (user is not None and user.is_active and user.is_staff):
        token = metrics_token()
        if token:
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
                response = HttpResponse("A valid bearer token is required.\n", status=401, content_type="text/plain")
                response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
                return response
        elif not from_loopback(request):
            return HttpResponse(
                "Metrics are served to loopback only; set METRICS_TOKEN to scrape from elsewhere.\n",
                status=403,
                content_type="text/plain",
            )
    body, content_type = exposition(request.headers.get("Accept", ""))
    response = HttpResponse(body, content_type=content_type)
    response.headers["Cache-Control"] = "no-store"
    return response
