"""The DRF exceptions a quota refusal is raised as, inside DRF views, throttles and authentication.

Each carries the framework-free :class:`~quotas.exceptions.ProblemException`
it stands for (``refusal``), its problem body (``problem``) and ``wait``, so
DRF's own exception handler answers it as DRF would (a 429 is a
:class:`~rest_framework.exceptions.Throttled` with ``Retry-After``, a 401 an
:class:`~rest_framework.exceptions.AuthenticationFailed` with the first
authentication class's challenge), and :mod:`quotas.drf.handlers` sends the
whole problem+json body.
"""

from __future__ import annotations

from http import HTTPStatus

from rest_framework.exceptions import APIException, AuthenticationFailed, Throttled

from quotas.exceptions import ProblemException


class QuotaAPIException(APIException):
    """A quota refusal as a DRF exception (any status; see the subclasses for 429 and 401)."""

    def __init__(self, refusal: ProblemException) -> None:
        super().__init__(detail=refusal.detail)
        self.refusal = refusal
        self.problem = refusal.problem
        self.status_code = refusal.status_code
        self.wait = refusal.wait  # set after Throttled's __init__, which DRF's handlers read as Retry-After


class QuotaThrottled(QuotaAPIException, Throttled):
    """A 429 refusal: DRF's Throttled, so DRF's handler and a project's own see the refusal they know."""


class QuotaAuthenticationFailed(QuotaAPIException, AuthenticationFailed):
    """A 401 refusal (a bad API key): DRF answers it with the first authentication class's challenge."""


def drf_exception(refusal: ProblemException) -> QuotaAPIException:
    """The DRF exception ``refusal`` is raised as in a DRF view."""
    if refusal.status_code == HTTPStatus.TOO_MANY_REQUESTS:
        return QuotaThrottled(refusal)
    if refusal.status_code == HTTPStatus.UNAUTHORIZED:
        return QuotaAuthenticationFailed(refusal)
    return QuotaAPIException(refusal)
