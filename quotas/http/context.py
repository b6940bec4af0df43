"""What a front door leaves on a Django request for the middleware, read and written in one place.

DRF throttles cannot touch the response, so :class:`~quotas.drf.throttling.QuotaThrottle`
leaves its :class:`~quotas.service.Verdict` on the request;
:class:`~quotas.http.middleware.QuotaHeadersMiddleware` reads it after the view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quotas.service import Verdict

_VERDICT = "quota_verdict"
_AUTH_WAIT = "quota_auth_wait"


def set_verdict(request: Any, verdict: Verdict | None) -> None:
    """Leave the request's verdict (headers, settling after the view); None takes it off."""
    setattr(request, _VERDICT, verdict)


def verdict_of(request: Any) -> Verdict | None:
    """The verdict left on ``request``, if any."""
    return getattr(request, _VERDICT, None)


def set_auth_wait(request: Any, seconds: int) -> None:
    """Mark a sign-in refused for too many failures (see quotas/identity/auth_failures.py)."""
    setattr(request, _AUTH_WAIT, seconds)


def auth_wait_of(request: Any) -> int:
    """Seconds a refused sign-in must wait (0: not refused)."""
    return getattr(request, _AUTH_WAIT, 0)
