"""problem+json (RFC 9457) for DRF: the one place a quota refusal becomes a response.

Every refusal the quota layer raises in a DRF view is a
:class:`~quotas.drf.exceptions.QuotaAPIException`, an ordinary DRF exception (a
429 is a :class:`~rest_framework.exceptions.Throttled`) that carries its problem
body. Use :func:`exception_handler` as
``REST_FRAMEWORK['EXCEPTION_HANDLER']``, or, with a handler of your own, call
:func:`problem_response` first::

    def my_exception_handler(exc, context):
        response = problem_response(exc)  # None unless exc is a quota refusal
        if response is None:
            response = my_previous_handler(exc, context)
        return response
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.http import HttpResponse
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from quotas.drf.exceptions import QuotaAPIException
from quotas.exceptions import ProblemException
from quotas.http import responses


def problem_response(exc: Exception) -> HttpResponse | None:
    """The ``application/problem+json`` response for a quota refusal, else None."""
    if not isinstance(exc, ProblemException | QuotaAPIException):
        return None
    return respond(exc.problem, exc)


def exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse | None:
    """A DRF exception handler: quota refusals as problem+json, everything else as DRF's default handler."""
    response = problem_response(exc)
    if response is None:
        response = drf_exception_handler(exc, context)
    return response


def respond(problem: dict[str, Any], exc: Exception) -> HttpResponse:
    """``problem`` as the response to DRF exception ``exc``: its status, Retry-After and WWW-Authenticate.

    The status is the exception's: DRF turns a 401 into a 403 when the first
    authentication class offers no ``WWW-Authenticate`` challenge.
    """
    status = getattr(exc, "status_code", problem["status"])
    response = responses.refusal_response(problem, status, getattr(exc, "wait", None))
    challenge = getattr(exc, "auth_header", None)
    if status == HTTPStatus.UNAUTHORIZED and challenge:
        response.headers["WWW-Authenticate"] = challenge  # the first authentication class's own
    set_rollback()
    return response
