"""Adds what the throttle decided to the response, and settles the decision after the view.

DRF throttles cannot touch the response, so :class:`QuotaThrottle` leaves
its verdict on the request (:mod:`quotas.http.context`). After the view, this
middleware settles it (:func:`quotas.service.settle`: a refund on a server
error when a limit asks for it, the actual cost a view reported, concurrency
leases) and adds the rate-limit headers (a refusal's body is the exception
handler's business, :mod:`quotas.drf.handlers`).

It also answers a sign-in that Django's authentication refused for too many
failures (:mod:`quotas.identity.auth_failures`) with a 429: Django's login views
cannot say so themselves; and it sets the trusted-device cookie of a browser
that just signed in (:mod:`quotas.identity.devices`). Sync and async: under
ASGI a request does not go through a thread unless it has a decision to settle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus
from inspect import iscoroutinefunction
from typing import Any

from asgiref.sync import markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponse

from quotas import problems
from quotas.exceptions import ProblemException
from quotas.http import responses
from quotas.http.context import set_verdict, verdict_of
from quotas.http.cost import actual_cost
from quotas.http.headers import rate_limit_headers
from quotas.identity import devices
from quotas.identity.auth_failures import refused_for
from quotas.service import Verdict, settle


class QuotaHeadersMiddleware:
    """Adds rate-limit headers and settles decisions (see module docstring)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self.__acall__(request)
        try:
            response = self.get_response(request)
        except BaseException:
            settle_failed(request)
            raise
        return after_view(request, response)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        try:
            response = await self.get_response(request)
        except BaseException:
            # Above all the CancelledError of a client that went away (Django cancels the request): its
            # lease ends and its estimate is released now, not when the lease expires.
            await sync_to_async(settle_failed)(request)
            raise
        verdict = verdict_of(request)
        if verdict is not None and _needs_settling(verdict, response):
            # Settling may call Redis (a refund, the actual cost, a lease): off the event loop.
            return await sync_to_async(after_view)(request, response)
        return after_view(request, response, settled=True)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A quota refusal raised outside DRF (a plain view reading the rules while the database is
        down, say) is answered with its problem+json body and Retry-After, not a 500."""
        if not isinstance(exception, ProblemException):
            return None
        return responses.refusal_response(exception.problem, exception.status_code, exception.wait)


def after_view(request: HttpRequest, response: HttpResponse, settled: bool = False) -> HttpResponse:
    """Everything the platform does to a response on its way out, in order: trust a browser that just signed
    in, answer a sign-in refused for too many failures, settle the verdict and label the response."""
    devices.set_cookie(request, response)
    refused = refuse_throttled_sign_in(request, response)
    if refused is not None:
        return refused
    return settle_and_label(request, response, settled)


def refuse_throttled_sign_in(request: HttpRequest, response: HttpResponse) -> HttpResponse | None:
    """A 429 in place of ``response`` when Django refused this sign-in for too many failures, else None."""
    wait = refused_for(request)
    if wait and response.status_code < HTTPStatus.INTERNAL_SERVER_ERROR:
        return auth_throttled(response, wait)
    return None


def settle_and_label(request: HttpRequest, response: HttpResponse, settled: bool = False) -> HttpResponse:
    """``response`` with the request's verdict settled (unless ``settled``) and its rate-limit headers added."""
    verdict = verdict_of(request)
    if verdict is None or verdict.decision is None:
        return response
    if not settled:
        settle(verdict, response.status_code, actual_cost(verdict.request))
    for name, value in rate_limit_headers(verdict.decision).items():
        response.headers[name] = value
    return response


def settle_failed(request: HttpRequest) -> None:
    """Settle the request's verdict as a failed request's (the view raised, or the request was cancelled)."""
    verdict = verdict_of(request)
    if verdict is not None:
        set_verdict(request, None)  # settled here: nothing later settles it again
        settle(verdict, HTTPStatus.INTERNAL_SERVER_ERROR)


def auth_throttled(response: HttpResponse, wait: int) -> HttpResponse:
    """A sign-in refused for too many failures (quotas.identity.auth_failures): 429, a page or a problem."""
    if response.get("Content-Type", "").startswith("text/html"):
        refused = HttpResponse(
            "<!doctype html><title>Too many failed sign-ins</title><h1>Too many failed sign-ins</h1>"
            f"<p>Too many attempts with wrong credentials. Try again in {wait} seconds.</p>",
            status=429,
            content_type="text/html; charset=utf-8",
        )
    else:
        refused = responses.render(problems.auth_throttled(wait))
    refused.headers["Retry-After"] = str(wait)
    return refused


def _needs_settling(verdict: Verdict, response: HttpResponse) -> bool:
    """Whether settling ``verdict`` after ``response`` has anything to do (it may then call Redis)."""
    decision = verdict.decision
    if decision is None or not decision.allowed:
        return False
    return (
        response.status_code >= HTTPStatus.INTERNAL_SERVER_ERROR
        or bool(decision.request_id)
        or actual_cost(verdict.request) is not None
        or decision.unreported  # budget alerts wait for the settled spend
    )
