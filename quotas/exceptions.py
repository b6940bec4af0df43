"""Exceptions raised by the quota engine and service; each carries the data a caller needs.

Framework-free: the DRF adapter turns a refusal into the DRF exception it is
(:mod:`quotas.drf.exceptions`).
"""

from __future__ import annotations


class QuotaError(Exception):
    """Base class of the engine's own errors."""


class ResetNotConfirmed(QuotaError):
    """:func:`quotas.api.reset` was called without ``confirm=True`` (it erases every client's counters)."""


class StoreUnavailable(QuotaError):
    """Redis could not be reached or answered with an error.

    Always raised ``from`` the underlying redis-py exception.
    """


class ScriptFailed(StoreUnavailable):
    """Redis answered the decision script with an error about the call itself (not an outage).

    The request is answered by the failure mode like any other Redis failure,
    but the circuit breaker stays closed (see :func:`quotas.store.backends.connect.is_script_error`).
    """


class InvalidRate(ValueError):
    """A rate string such as ``"10/s; 100/min"`` could not be parsed."""


class ProblemException(QuotaError):
    """A request the quota layer refuses, with its RFC 9457 problem body; framework-free.

    ``problem`` is the body (type, title, status, detail, extras);
    ``status_code`` its HTTP status; ``wait`` the seconds for ``Retry-After``
    (None: none). Front doors answer it in their framework's way: the plain
    Django ones with :func:`quotas.http.responses.refusal_response`, the DRF
    adapter by raising the matching DRF exception
    (:func:`quotas.drf.exceptions.drf_exception`).
    """

    status_code = 400

    def __init__(self, problem: dict[str, object], wait: float | None = None) -> None:
        super().__init__(str(problem.get("detail", problem.get("title"))))
        self.problem = problem
        self.status_code = int(str(problem["status"]))
        self.wait = wait

    @property
    def detail(self) -> str:
        """The problem's human sentence."""
        return str(self.args[0]) if self.args else ""


class QuotaExceeded(ProblemException):
    """A request refused by a limit, a budget, a ban or a full shaping queue (429)."""

    status_code = 429


class InvalidAPIKey(ProblemException):
    """The request sent an API key that is unknown, malformed, revoked or expired (401)."""

    status_code = 401


class QuotaServiceUnavailable(ProblemException):
    """The quota store is down and QUOTAS['FAILURE_MODE'] is ``closed`` (503)."""

    status_code = 503


class RulesUnavailable(ProblemException):
    """The rules (plans, API keys, users' subscriptions) cannot be read: the database is down (503).

    Raised where no snapshot or cached answer can stand in: a process's first
    load of the rules, an API key or user this process has not looked up yet.
    ``wait`` is when the next attempt to read the database is due.
    """

    status_code = 503


class ReducedCapacity(ProblemException):
    """Refused only because adaptive limits are reduced under load (503)."""

    status_code = 503


class AccessDenied(ProblemException):
    """A deny-list entry refuses the request (403)."""

    status_code = 403


class InvalidQuotaRequest(ProblemException):
    """A request whose weight or cost, as its view derived it, is out of bounds (400)."""

    status_code = 400


class AuthThrottled(ProblemException):
    """Too many failed authentications from this address (or for this username): 429 with Retry-After."""

    status_code = 429
