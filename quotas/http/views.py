"""/healthz: is Redis reachable, and in which mode is the engine; /metrics: Prometheus exposition."""

from __future__ import annotations

import hmac
import ipaddress
import time

from django.http import HttpRequest, HttpResponse, JsonResponse

from quotas import problems
from quotas.engine import default_engine
from quotas.exceptions import StoreUnavailable
from quotas.formats.store_urls import describe
from quotas.http import responses
from quotas.identity.auth_failures import failed_auth, token_tag
from quotas.metrics_exposition import DefaultSeries, default_series, exposition
from quotas.settings import quota_settings


def healthz(request: HttpRequest) -> HttpResponse:
    """200 when Redis answers, else 503; says how this process decides right now.

    ``engine.mode`` is ``normal``, or while Redis is down (the circuit breaker
    open) ``fallback`` (failure mode local), ``fail-open`` or ``fail-closed``.
    ``status`` is ``degraded`` too while the rules snapshot is stale (the
    database failed; the last good one is served, see ``rules``).
    Anyone gets the status and the mode; operators (staff signed in to the
    admin, or holders of the metrics token) also get the details, whose
    Redis address and error text are of use to an attacker too. A wrong
    metrics token counts as a failed authentication, as at ``/metrics``
    (past the limit, token attempts from that address get 429: :func:`token_attempt`).
    """
    wait = token_attempt(request)
    if wait:
        return auth_throttled(wait)
    runtime = default_engine.runtime()
    started = time.perf_counter()
    try:
        runtime.store.server.ping()
        redis_ok, error = True, None
    except StoreUnavailable as exc:
        redis_ok, error = False, str(exc)
    if redis_ok and not runtime.guard.breaker.is_open:
        mode = "normal"
    else:
        mode = {"local": "fallback", "open": "fail-open", "closed": "fail-closed"}[quota_settings.FAILURE_MODE]
    rules = runtime.rules.status()
    status = 200 if redis_ok else 503
    degraded = not redis_ok or rules["state"] != "ok"  # a stale snapshot still serves: 200, but say so
    # The failure mode is public: whoever relies on the API may know that its limits hold, lapse or refuse
    # while Redis is away (mode "fallback" with failure_mode "local": requests are answered, limited per process).
    body: dict = {
        "status": "degraded" if degraded else "ok",
        "engine": {"mode": mode, "failure_mode": quota_settings.FAILURE_MODE},
    }
    if not is_operator(request):
        return JsonResponse(body, status=status)
    body["rules"] = rules
    body["redis"] = {
        "reachable": redis_ok,
        "topology": describe(quota_settings.REDIS_URL),
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
    }
    body["engine"].update(
        breaker_open=runtime.guard.breaker.is_open,
        usage_held_in_process=bool(runtime.guard.usage_buffer),
    )
    if error:
        body["redis"]["error"] = error
    return JsonResponse(body, status=status)


def metrics_token() -> str:
    """The scrape token: ``QUOTAS['METRICS']['TOKEN']`` ("" when none is set)."""
    return str(quota_settings.METRICS["TOKEN"] or "")


def has_metrics_token(request: HttpRequest) -> bool:
    """Whether the request carries ``Authorization: Bearer <the metrics token>`` (False when none is set)."""
    token = metrics_token()
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def is_operator(request: HttpRequest) -> bool:
    """Staff signed in to the admin, or a holder of the metrics token."""
    return is_staff(request) or has_metrics_token(request)


def is_staff(request: HttpRequest) -> bool:
    """Whether the request comes from an active staff user signed in to the admin."""
    user = getattr(request, "user", None)
    return user is not None and user.is_active and user.is_staff


def token_attempt(request: HttpRequest) -> int:
    """Seconds ``request`` must wait for its address's failed authentications (0: answer it).

    A request of anyone but staff that sends ``Authorization: Bearer ...``
    while a metrics token is set is an attempt at that token, counted like a
    bad API key (:mod:`quotas.identity.auth_failures`): a wrong token is a
    failure of its address, and once the address has used up
    ``QUOTAS['FAILED_AUTH_LIMITS']['address']`` every attempt from it is
    refused until the window ends, the right token included. Unlike a
    256-bit API key, which is answered on its merits, the token is chosen by
    the operator and may be guessable: answering it during a block would let
    the guesser tell right from wrong (200 or 429) without limit. The failure
    that uses the limit up is answered as usual. No Redis call for the right
    token while the process knows of no block.
    """
    scheme, _, _ = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not metrics_token() or is_staff(request):
        return 0
    tag = token_tag(request)
    wait = failed_auth.wait(tag) if failed_auth.blocking else 0
    if wait or has_metrics_token(request):
        return wait
    return failed_auth.record(tag)


def auth_throttled(wait: int) -> HttpResponse:
    """The 429 problem+json for an address over its failed authentications, with Retry-After."""
    response = responses.render(problems.auth_throttled(wait))
    response.headers["Retry-After"] = str(wait)
    return response


def from_loopback(request: HttpRequest) -> bool:
    """Whether the peer is this machine and no proxy said it relayed the request.

    A local reverse proxy that adds no X-Forwarded-For (nginx's default)
    makes every client look local: hence loopback access is off unless a
    project turns on ``QUOTAS['METRICS']['ALLOW_LOOPBACK']``.
    """
    if "HTTP_X_FORWARDED_FOR" in request.META or "HTTP_FORWARDED" in request.META:
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics of every process (see :mod:`quotas.metrics`).

    Served to staff signed in to the admin, to ``Authorization: Bearer
    <QUOTAS['METRICS']['TOKEN']>``, and, only where the project sets
    ``QUOTAS['METRICS']['ALLOW_LOOPBACK']`` and no token is configured, to
    loopback peers. Others get a problem+json 401 (a token is configured) or
    403 (none is: it says what to configure). A wrong token counts as a failed
    authentication of the client's address: past ``QUOTAS['FAILED_AUTH_LIMITS']``
    every token attempt from it gets 429 (see :func:`token_attempt`).
    """
    wait = token_attempt(request)
    if wait:
        return auth_throttled(wait)
    if not is_operator(request):
        if metrics_token():
            response = responses.render(
                _problem(
                    401,
                    "metrics-token-required",
                    "A valid bearer token is required: Authorization: Bearer <token>.",
                )
            )
            response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        if not (quota_settings.METRICS["ALLOW_LOOPBACK"] and from_loopback(request)):
            return responses.render(
                _problem(
                    403,
                    "metrics-not-configured",
                    "Set QUOTAS['METRICS']['TOKEN'] and scrape with Authorization: Bearer <token> (or, for a "
                    "scraper on this host with no proxy in front, set QUOTAS['METRICS']['ALLOW_LOOPBACK'] = True).",
                )
            )
    body, content_type = exposition(request.headers.get("Accept", ""), default_series())
    response = HttpResponse(body, content_type=content_type)
    response.headers["Cache-Control"] = "no-store"
    return response


def plan_multipliers() -> list[DefaultSeries]:
    """Every plan of the rules snapshot at the adaptive multiplier in force (1 unless the controller cut it).

    /metrics shows these wherever no process has published a plan's
    multiplier yet (see :func:`quotas.metrics_exposition.add_default_series`).
    """
    runtime = default_engine.runtime()
    snapshot = runtime.rules.current()
    return [({"plan": plan.slug}, runtime.multipliers.get(plan_id)) for plan_id, plan in snapshot.plans.items()]


def _problem(status: int, slug: str, detail: str) -> dict:
    return {
        "type": problems.problem_type(slug),
        "title": "Metrics access refused",
        "status": status,
        "detail": detail,
    }
