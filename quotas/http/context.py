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


def set_verdict(request: Any, verdict: Verdict | None) -> None:
    """Leave the request's verdict (headers, settling after the view); None takes it off."""
    setattr(request, _VERDICT, verdict)


def verdict_of(request: Any) -> Verdict | None:
    """The verdict left on ``request``, if any."""
    return getattr(request, _VERDICT, None)
