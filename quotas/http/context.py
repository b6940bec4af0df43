"""What a front door leaves on a Django request for the middleware, read and written in one place.

DRF throttles cannot touch the response, so :class:`~quotas.drf.throttling.QuotaThrottle`
leaves its :class:`~quotas.decide.Verdict` on the request;
:class:`~quotas.http.middleware.QuotaHeadersMiddleware` reads it after the view.
A view may list several throttle classes that decide on their own (one counting
per tenant beside one counting per subscriber): each leaves its verdict, in the
order they decided, and every one is settled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quotas.decide import Verdict

#: The request attribute the verdicts are left in: a list, in the order they were made. The two on every
#: request's path use it directly: QuotaThrottle reads and extends it (two calls less than verdicts_of() and
#: add_verdict(), about 1,400 instructions: cachegrind), the middleware reads it once after the view. Any
#: other front door or reader goes through the functions below.
VERDICTS = "quota_verdicts"

#: The middleware that settles the verdicts left on a request after the view, by either of its import paths
#: (QuotaThrottle and check W002 look for it in MIDDLEWARE).
SETTLING_MIDDLEWARE = frozenset(
    {"quotas.middleware.QuotaHeadersMiddleware", "quotas.http.middleware.QuotaHeadersMiddleware"}
)


def add_verdict(request: Any, verdict: Verdict) -> None:
    """Leave ``verdict`` on the request, after those already there (headers, settling after the view)."""
    verdicts = getattr(request, VERDICTS, None)
    if verdicts is None:
        setattr(request, VERDICTS, [verdict])
    else:
        verdicts.append(verdict)


def verdicts_of(request: Any) -> list[Verdict]:
    """The verdicts left on ``request``, in the order they were made (empty if none)."""
    return getattr(request, VERDICTS, None) or []


def take_verdicts(request: Any) -> list[Verdict]:
    """The verdicts left on ``request``, taken off it (settled now: nothing settles them again)."""
    verdicts = verdicts_of(request)
    setattr(request, VERDICTS, [])
    return verdicts


def verdict_of(request: Any) -> Verdict | None:
    """The first verdict left on ``request`` (the one that priced it), if any."""
    verdicts = verdicts_of(request)
    return verdicts[0] if verdicts else None
