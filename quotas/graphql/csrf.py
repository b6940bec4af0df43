"""CSRF for the GraphQL views: checked for a signed-in browser, not for an API key client.

A GraphQL endpoint serves two kinds of caller. An API client sends its key in ``QUOTAS['API_KEY_HEADER']``
and no cookie: Django's blanket ``CsrfViewMiddleware`` check would refuse its every POST, which is why the
views used to be wrapped in ``csrf_exempt``. A browser whose user is signed in sends the session cookie with
every request, including one a page of another site makes it send: exempt, such a request would run a
mutation as that user and spend that user's quota. So, as DRF's ``SessionAuthentication.enforce_csrf`` does,
the views are exempt from the middleware's check and run the same check themselves, for the requests it
protects (:func:`csrf_failure`):

- a request whose method is unsafe (not GET, HEAD, OPTIONS or TRACE: Django's rule);
- that carries no API key of this platform (:func:`quotas.identity.clients.api_key_of`: the quota layer
  counts such a request as the key's, and a page of another site cannot make a browser send a header of its
  choosing without that site's CORS consent);
- whose ``request.user`` is authenticated (Django's ``AuthenticationMiddleware``: a session cookie, or any
  other middleware that signs a user in from what the browser sends on its own). An anonymous request runs
  as nobody, and counts against its address as any request from there does.

A refusal is a 403 ``csrf-failed`` (GraphQL's error shape, :mod:`quotas.graphql.responses`), decided before
anything is read, counted or run.
"""

from __future__ import annotations

from typing import Any, cast

from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware

from quotas import problems
from quotas.graphql.responses import graphql_refusal
from quotas.identity.clients import api_key_of

#: The methods Django's CSRF check lets through (RFC 9110's safe methods): a GET query runs without a token.
SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


class _Check(CsrfViewMiddleware):
    """Django's CSRF middleware, returning its reason for a refusal instead of answering with the failure view
    (as DRF's ``CSRFCheck`` does)."""

    def _reject(self, request: HttpRequest, reason: str) -> Any:
        return reason


def _no_response(request: HttpRequest) -> HttpResponse:  # pragma: no cover - the check never calls it
    raise AssertionError("the CSRF check answers nothing: it only gives a reason")


def needs_check(request: HttpRequest) -> bool:
    """Whether ``request`` comes in a way only a signed-in browser's forged request can: unsafe method, no API key
    of ours (both read without I/O). Its user is then the one to ask about (:func:`csrf_failure`)."""
    return (request.method or "").upper() not in SAFE_METHODS and api_key_of(request) is None


def csrf_failure(request: HttpRequest) -> str | None:
    """Django's reason for refusing ``request`` (e.g. "CSRF token missing."), or None when it passes or is not
    checked (module docstring). Reads ``request.user`` and the CSRF cookie (or the session, with
    ``CSRF_USE_SESSIONS``): call it from sync code."""
    if not needs_check(request):
        return None
    user = getattr(request, "user", None)
    if not getattr(user, "is_authenticated", False):
        return None
    check = _Check(_no_response)
    check.process_request(request)  # reads the CSRF cookie into request.META, which process_view compares
    # The callback is only asked whether it is csrf_exempt (it is not); _reject gives the reason, not a response.
    return cast("str | None", check.process_view(request, _no_response, (), {}))


def csrf_refusal(reason: str) -> HttpResponse:
    """The 403 GraphQL error response for a request Django's CSRF check refused for ``reason``."""
    return graphql_refusal(problems.csrf_failed(reason))
