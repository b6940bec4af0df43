"""Refusals as GraphQL answers: ``{"errors": [{"message": ..., "extensions": <problem details>}]}``.

A GraphQL client reads ``errors``, not a problem+json body, so a refusal is
sent in GraphQL's shape: one error whose ``message`` is the problem's
``detail`` and whose ``extensions`` are the whole problem (RFC 9457 members:
``type``, ``status``, ``reason``, ``retry_after``, ``limit``, ``upgrade``...,
the very body a REST client gets). The status and the headers are the REST
refusal's (429 with ``Retry-After``; 401 with ``WWW-Authenticate``; the
``RateLimit`` headers added by the caller), taken from
:func:`quotas.http.responses.refusal_response` so they cannot drift.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse

from quotas.exceptions import ProblemException
from quotas.http import responses

#: GraphQL over HTTP's media type for ``application/json`` clients (what graphene-django and strawberry send).
CONTENT_TYPE = "application/json"
_NOT_COPIED = ("content-type", "content-length")


def graphql_error(problem: dict[str, Any]) -> dict[str, Any]:
    """The GraphQL response body carrying ``problem``: one error, the problem in its ``extensions``."""
    return {"errors": [{"message": problem.get("detail") or problem["title"], "extensions": problem}]}


def graphql_refusal(problem: dict[str, Any], status: int | None = None, wait: float | None = None) -> HttpResponse:
    """``problem`` as a GraphQL error response, with the status and headers its REST refusal has."""
    rest = responses.refusal_response(problem, status, wait)
    sent = json.loads(rest.content)  # the problem as sent: its status set to the response's
    response = HttpResponse(json.dumps(graphql_error(sent)), status=rest.status_code, content_type=CONTENT_TYPE)
    for name, value in rest.headers.items():
        if name.lower() not in _NOT_COPIED:
            response.headers[name] = value
    return response


def refusal_of(exc: ProblemException) -> HttpResponse:
    """The GraphQL error response of a refusal the service returned (429, 400, 401, 403 or 503)."""
    return graphql_refusal(exc.problem, exc.status_code, exc.wait)
