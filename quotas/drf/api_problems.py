"""problem+json (RFC 9457) bodies of the platform's own APIs (usage, notifications), and their DRF exception handler."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.http import HttpResponse
from rest_framework import exceptions

from quotas import problems
from quotas.drf.exceptions import QuotaAPIException
from quotas.drf.handlers import respond
from quotas.exceptions import ProblemException
from quotas.settings import quota_settings


def invalid_query(errors: dict[str, str]) -> dict[str, Any]:
    """The 400 body: ``errors`` maps each bad query parameter to what is wrong with it."""
    names = ", ".join(sorted(errors))
    return {
        "type": problems.problem_type("invalid-usage-query"),
        "title": "Invalid usage query",
        "status": 400,
        "detail": f"Check the query parameter(s): {names}.",
        "errors": errors,
    }


def not_authenticated() -> dict[str, Any]:
    """The 401 body for a request with neither an API key nor a signed-in user."""
    return {
        "type": problems.problem_type("not-authenticated"),
        "title": "Authentication required",
        "status": 401,
        "detail": f"Send your API key in the {quota_settings.API_KEY_HEADER} header, or sign in as staff.",
    }


def forbidden(detail: str) -> dict[str, Any]:
    """The 403 body: the caller is known but may not see what it asked for."""
    return {"type": problems.problem_type("forbidden"), "title": "Forbidden", "status": 403, "detail": detail}


def exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse | None:
    """The usage API's DRF exception handler: every API error as ``application/problem+json``.

    Quota refusals keep their own bodies; the usage API's errors get the
    bodies above; both are sent by quotas' one renderer
    (:func:`quotas.drf.handlers.respond`). A plain response, so the error is
    JSON even when the request asked for CSV. Other exceptions (bugs) are
    left to Django: None.
    """
    if isinstance(exc, ProblemException | QuotaAPIException):
        problem = exc.problem
    elif isinstance(exc, exceptions.ValidationError):
        problem = invalid_query(_flatten(exc.detail))
    elif isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        problem = not_authenticated()
        if isinstance(exc, exceptions.AuthenticationFailed):
            problem["detail"] = str(exc.detail)
    elif isinstance(exc, exceptions.PermissionDenied):
        problem = forbidden(str(exc.detail))
    elif isinstance(exc, exceptions.APIException):
        status = exc.status_code
        title = HTTPStatus(status).phrase
        problem = {"type": "about:blank", "title": title, "status": status, "detail": str(exc.detail)}
    else:
        return None
    return respond(problem, exc)


def _flatten(detail: Any) -> dict[str, str]:
    # DRF gives {field: [ErrorDetail, ...]} (or a list for non-field errors): one message per field.
    if not isinstance(detail, dict):
        detail = {"query": detail}
    out = {}
    for name, messages in detail.items():
        while isinstance(messages, list | dict):
            messages = next(iter(messages.values() if isinstance(messages, dict) else messages), "")
        out["query" if name == "non_field_errors" else name] = str(messages)
    return out
