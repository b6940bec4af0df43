"""Problem bodies (:mod:`quotas.problems`) as Django responses: ``application/problem+json``."""

from __future__ import annotations

import json
import math
from http import HTTPStatus
from typing import Any

from django.http import HttpResponse

from quotas.problems import CONTENT_TYPE
from quotas.settings import quota_settings


def render(problem: dict[str, Any], like: HttpResponse | None = None) -> HttpResponse:
    """An ``application/problem+json`` response, keeping ``like``'s other headers."""
    response = HttpResponse(_ENCODER.encode(problem), status=int(problem["status"]), content_type=CONTENT_TYPE)
    if like is not None:
        for name, value in like.headers.items():
            if name.lower() not in _NOT_COPIED:
                response.headers[name] = value
    return response


def refusal_response(problem: dict[str, Any], status: int | None = None, wait: float | None = None) -> HttpResponse:
    """``problem`` as a response: its status (or ``status``), ``Retry-After`` from ``wait`` or the body's
    ``retry_after``, and for a 401 the ``WWW-Authenticate`` challenge RFC 9110 asks for."""
    status = status or int(problem["status"])
    if status != problem["status"]:
        problem = {**problem, "status": status}
    response = render(problem)
    if wait is None:
        wait = problem.get("retry_after")
    if wait is not None:
        response.headers["Retry-After"] = str(math.ceil(wait))
    if status == HTTPStatus.UNAUTHORIZED:
        response.headers["WWW-Authenticate"] = f'ApiKey header="{quota_settings.API_KEY_HEADER}"'
    return response


# dumps() with options builds an encoder on every call; this one gives the same text.
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_NOT_COPIED = ("content-type", "content-length")
