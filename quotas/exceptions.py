"""Exceptions raised by the quota engine; each carries the data a caller needs."""

from __future__ import annotations

from rest_framework import status
from rest_framework.exceptions import APIException


class QuotaError(Exception):
    """Base class of the engine's own errors."""


class StoreUnavailable(QuotaError):
    """Redis could not be reached or answered with an error.

    Always raised ``from`` the underlying redis-py exception.
    """


class ScriptFailed(StoreUnavailable):
    """Redis answered the decision script with an error about the call itself (not an outage).

    The request is answered by the failure mode like any other Redis failure,
    but the circuit breaker stays closed (see :func:`quotas.redis_connect.is_script_error`).
    """


class InvalidRate(ValueError):
    """A rate string such as ``"10/s; 100/min"`` could not be parsed."""


class ProblemException(APIException):
    """An APIException that the middleware renders as ``application/problem+json``.

    ``problem`` is the RFC 9457 body (type, title, status, detail, extras).
    """

    def __init__(self, problem: dict[str, object], wait: int | None = None) -> None:
        self.problem = problem
        self.status_code = int(str(problem["status"]))
        self.wait = wait  # DRF's exception handler turns it into Retry-After
        super().__init__(detail=str(problem.get("detail", problem.get("title"))))


class InvalidAPIKey(ProblemException):
    """The request sent an API key that is unknown, malformed or revoked (401)."""

    status_code = status.HTTP_401_UNAUTHORIZED


class QuotaServiceUnavailable(ProblemException):
    """The quota store is down and QUOTAS['FAILURE_MODE'] is ``closed`` (503)."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE


class ReducedCapacity(ProblemException):
    """Refused only because adaptive limits are reduced under load (503)."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE


class AccessDenied(ProblemException):
    """A deny-list entry refuses the request (403)."""

    status_code = status.HTTP_403_FORBIDDEN


class InvalidQuotaRequest(ProblemException):
    """A request whose weight or cost, as its view derived it, is out of bounds (400)."""

    status_code = status.HTTP_400_BAD_REQUEST


class AuthThrottled(ProblemException):
    """Too many failed authentications from this address (or for this username): 429 with Retry-After."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
