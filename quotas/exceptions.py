"""Exceptions raised by the quota engine; each carries the data a caller needs."""

from __future__ import annotations

from rest_framework import status
from rest_framework.exceptions import APIException, AuthenticationFailed, Throttled


class QuotaError(Exception):
    """Base class of the engine's own errors."""


class StoreUnavailable(QuotaError):
    """Redis could not be reached or answered with an error.

    Always raised ``from`` the underlying redis-py exception.
    """


class ScriptFailed(StoreUnavailable):
    """Redis answered the decision script with an error about the call itself (not an outage).

    The request is answered by the failure mode like any other Redis failure,
    but the circuit breaker stays closed (see :func:`quotas.engine.redis_connect.is_script_error`).
    """


class InvalidRate(ValueError):
    """A rate string such as ``"10/s; 100/min"`` could not be parsed."""


class ProblemException(APIException):
    """An ordinary DRF exception that also carries its RFC 9457 problem body.

    ``problem`` is the body (type, title, status, detail, extras); ``detail``
    is its human sentence, so any exception handler can show it. The handler
    in :mod:`quotas.drf.handlers` sends the whole body as
    ``application/problem+json``; DRF's own handler sends ``{"detail": ...}``.
    """

    def __init__(self, problem: dict[str, object], wait: int | None = None) -> None:
        super().__init__(detail=str(problem.get("detail", problem.get("title"))))
        self.problem = problem
        self.status_code = int(str(problem["status"]))
        self.wait = wait  # DRF's exception handlers turn it into Retry-After (set after Throttled's __init__)


class QuotaExceeded(ProblemException, Throttled):
    """A request refused by a limit, a budget, a ban or a full shaping queue (429).

    A :class:`~rest_framework.exceptions.Throttled`, so DRF's handler and a
    project's own see the refusal they know, with ``wait`` as Retry-After.
    """

    status_code = status.HTTP_429_TOO_MANY_REQUESTS


class InvalidAPIKey(ProblemException, AuthenticationFailed):
    """The request sent an API key that is unknown, malformed, revoked or expired (401).

    An :class:`~rest_framework.exceptions.AuthenticationFailed`: DRF answers it
    with the first authentication class's ``WWW-Authenticate`` header, so
    :class:`quotas.drf.authentication.APIKeyAuthentication` goes first.
    """

    status_code = status.HTTP_401_UNAUTHORIZED


class QuotaServiceUnavailable(ProblemException):
    """The quota store is down and QUOTAS['FAILURE_MODE'] is ``closed`` (503)."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE


class RulesUnavailable(ProblemException):
    """The rules (plans, API keys, users' subscriptions) cannot be read: the database is down (503).

    Raised where no snapshot or cached answer can stand in: a process's first
    load of the rules, an API key or user this process has not looked up yet.
    ``wait`` is when the next attempt to read the database is due.
    """

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


class AuthThrottled(ProblemException, Throttled):
    """Too many failed authentications from this address (or for this username): 429 with Retry-After."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
