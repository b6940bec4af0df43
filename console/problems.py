"""The self-service API's error bodies: problem+json, as the usage API's, with a body's field errors named; and the
one place the API translates what the console's access checks and actions raise (:func:`api_error`)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponse
from rest_framework import exceptions, status

from quotas import problems
from quotas.drf import api_problems
from quotas.drf.handlers import respond

from .errors import MailLimitReached, Missing, NotSignedIn, ReadOnly, StateConflict

#: Where a body's error of no one field is named, as DRF names it.
NON_FIELD = "non_field_errors"


class Conflict(exceptions.APIException):
    """409: the resource is not in a state that allows the change (the ``detail`` says why)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The resource is not in a state that allows this."
    default_code = "conflict"


def invalid_request(errors: dict[str, str]) -> dict[str, Any]:
    """The 400 body: ``errors`` maps each bad field to what is wrong with it."""
    # One error of no field (a limit reached): the detail says it; otherwise it names the fields.
    only = errors[NON_FIELD] if set(errors) == {NON_FIELD} else None
    return {
        "type": problems.problem_type("invalid-request"),
        "title": "Invalid request",
        "status": 400,
        "detail": only or f"Check the field(s): {', '.join(sorted(errors))}.",
        "errors": errors,
    }


def too_many_mails(exc: MailLimitReached) -> dict[str, Any]:
    """The 429 body of a confirmation mail over a limit: ``limit`` says which (``per`` address or subscription,
    ``mails`` in ``seconds``), ``retry_after`` when one more is admitted (as the ``Retry-After`` header)."""
    return {
        "type": problems.problem_type("too-many-confirmation-mails"),
        "title": "Too many confirmation mails",
        "status": 429,
        "detail": str(exc),
        "limit": exc.limit,
        "retry_after": exc.wait,
    }


def api_error(exc: Exception) -> Exception:
    """``exc`` as the DRF exception the API answers with: :class:`~console.errors.NotSignedIn` is a 401,
    :class:`~console.errors.ReadOnly` a 403, :class:`~console.errors.Missing` (a subscription or an object of it)
    a 404, :class:`~console.errors.StateConflict` a 409, each with the message, and Django's ``ValidationError``
    a 400 naming its fields. Anything else is returned as it is. Called by the console's views on every exception
    before DRF handles it (so a 401 carries the authentication class's ``WWW-Authenticate`` challenge)."""
    if isinstance(exc, NotSignedIn):
        return exceptions.NotAuthenticated()
    if isinstance(exc, ReadOnly):
        return exceptions.PermissionDenied(str(exc))
    if isinstance(exc, Missing):
        return exceptions.NotFound(str(exc))
    if isinstance(exc, StateConflict):
        return Conflict(str(exc))
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(_fields(exc))
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse | None:
    """Every error of the self-service API as ``application/problem+json`` (the usage API's handler, with a
    request body's errors as ``invalid-request``). What the console raises is translated by :func:`api_error`;
    :class:`~console.errors.MailLimitReached` is a 429 naming its limit, with ``Retry-After``."""
    if isinstance(exc, MailLimitReached):
        return respond(too_many_mails(exc), exceptions.Throttled(exc.wait))
    exc = api_error(exc)
    if isinstance(exc, exceptions.ValidationError):
        return respond(invalid_request(_messages(exc.detail)), exc)
    return api_problems.exception_handler(exc, context)


def _fields(exc: DjangoValidationError) -> dict[str, list[str]]:
    return exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD: exc.messages}


def _messages(detail: Any, prefix: str = "") -> dict[str, str]:
    # DRF gives {field: [ErrorDetail, ...]}, nested for nested serializers, or a list for non-field errors.
    if isinstance(detail, list):
        if detail and all(not isinstance(d, list | dict) for d in detail):
            return {prefix or "non_field_errors": " ".join(str(d) for d in detail)}
        out: dict[str, str] = {}
        for i, item in enumerate(detail):
            out.update(_messages(item, f"{prefix}[{i}]" if prefix else str(i)))
        return out
    if isinstance(detail, dict):
        out = {}
        for name, messages in detail.items():
            out.update(_messages(messages, f"{prefix}.{name}" if prefix else str(name)))
        return out
    return {prefix or "non_field_errors": str(detail)}
