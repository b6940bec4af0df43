"""What the throttle leaves on a Django request for the middleware, read and written in one place.

DRF throttles cannot touch the response, so :class:`~quotas.drf.throttling.QuotaThrottle`
leaves its decision on the request;
:class:`~quotas.http.middleware.QuotaHeadersMiddleware` reads them after the view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quotas.engine.decision import Decision
    from quotas.identity.clients import Client

_DECISION = "quota_decision"
_AUTH_WAIT = "quota_auth_wait"


@dataclass(slots=True)
class Decided:
    """A request's decision with what the middleware needs after the view."""

    decision: Decision
    client: Client
    plan_id: int | None
    request: Any  # DRF's Request: where the view may report its actual cost (quota_cost)


def set_decided(request: Any, decided: Decided | None) -> None:
    """Leave the request's decision (headers, cost reconciliation, leases after the view); None takes it off."""
    setattr(request, _DECISION, decided)


def decided_of(request: Any) -> Decided | None:
    """The decision left on ``request``, if any."""
    return getattr(request, _DECISION, None)


def set_auth_wait(request: Any, seconds: int) -> None:
    """Mark a sign-in refused for too many failures (see quotas/identity/auth_failures.py)."""
    setattr(request, _AUTH_WAIT, seconds)


def auth_wait_of(request: Any) -> int:
    """Seconds a refused sign-in must wait (0: not refused)."""
    return getattr(request, _AUTH_WAIT, 0)
