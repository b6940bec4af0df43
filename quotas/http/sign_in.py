"""Sign-ins: a 429 for one refused for too many failures, and the trusted-device cookie of a browser that signed in.

Django's login views cannot say "too many attempts" themselves: when
:mod:`quotas.identity.auth_failures` refuses a sign-in (``FailedAuthBackend``, or the
failure that used a limit up), it only marks the request, and this middleware answers
it with a 429 (a page for a browser, a problem+json body otherwise) with ``Retry-After``.
A server error stays as it is: it says more than the refusal.

After a successful sign-in (``user_logged_in``), :mod:`quotas.identity.devices` has
prepared a cookie naming the browser as trusted for that user: this middleware sets it.

It goes before :class:`~quotas.http.middleware.QuotaHeadersMiddleware` in ``MIDDLEWARE``
(so it sees the response after it): the request's quota decisions are settled and labelled
there first, like any request's, and a refused sign-in's 429 carries no rate-limit headers,
whose numbers would be the plan's, not the sign-in limit's. Neither job calls Redis or the
database, so under ASGI it answers on the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse

from quotas import problems
from quotas.http import responses
from quotas.http.hybrid import HybridMiddleware
from quotas.identity import devices
from quotas.identity.auth_failures import refused_for

#: This middleware by either of its import paths (check quotas.W007 looks for it in MIDDLEWARE).
SIGN_IN_MIDDLEWARE = frozenset(
    {"quotas.middleware.SignInThrottleMiddleware", "quotas.http.sign_in.SignInThrottleMiddleware"}
)


class SignInThrottleMiddleware(HybridMiddleware):
    """Answers a sign-in refused for too many failures with a 429, and trusts a browser that signed in (see the
    module docstring)."""

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self.__acall__(request)
        return after_sign_in(request, self.get_response(request))

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        return after_sign_in(request, await self.get_response(request))


def after_sign_in(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """``response`` with the trusted-device cookie set if the request signed in, or a 429 in its place when
    Django refused this sign-in for too many failures."""
    devices.set_cookie(request, response)
    wait = refused_for(request)
    if wait and response.status_code < HTTPStatus.INTERNAL_SERVER_ERROR:
        return auth_throttled(response, wait)
    return response


def auth_throttled(response: HttpResponse, wait: int) -> HttpResponse:
    """A sign-in refused for too many failures (quotas.identity.auth_failures): 429, a page or a problem, as
    ``response`` was."""
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
