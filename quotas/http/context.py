"""What a front door leaves on a request for the middleware, read and written in one place.

DRF throttles cannot touch the response, so :class:`~quotas.drf.throttling.QuotaThrottle`
leaves its :class:`~quotas.decide.Verdict` on the request;
:class:`~quotas.http.middleware.QuotaHeadersMiddleware` reads it after the view.
A view may list several throttle classes that decide on their own (one counting
per tenant beside one counting per subscriber): each leaves its verdict, in the
order they decided, and every one is settled.

They are left in the request's ``META`` under :data:`STATE_KEY`, as a WSGI
component keeps its own data in the environ (a name of its own, prefixed): DRF's
``Request`` reads ``META`` from the Django request it wraps (its documented
proxying), so the throttle, given DRF's request, and the middleware, given
Django's, find the same :class:`RequestState` without reaching inside DRF.

Each such read through DRF's request raises and catches an AttributeError
first, so the throttle reads the Django request the middleware is handling
(:data:`HANDLING`) directly.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.http import HttpRequest

if TYPE_CHECKING:
    from quotas.decide import Verdict

#: The key of a request's :class:`RequestState` in its ``META``.
STATE_KEY = "quotas.state"

#: The middleware that settles the verdicts left on a request after the view, by either of its import paths
#: (QuotaThrottle and check W002 look for it in MIDDLEWARE).
SETTLING_MIDDLEWARE = frozenset(
    {"quotas.middleware.QuotaHeadersMiddleware", "quotas.http.middleware.QuotaHeadersMiddleware"}
)


@dataclass(slots=True, eq=False, repr=False)  # repr: META is shown on Django's debug page
class RequestState:
    """What the front doors leave on one request: ``verdicts`` in the order they were made; ``decided``, the DRF
    throttle classes whose decision is made (see :class:`~quotas.drf.throttling.QuotaThrottle`); ``cost``, an
    actual cost :func:`~quotas.http.cost.set_cost` reported."""

    verdicts: list[Verdict] = field(default_factory=list)
    decided: frozenset[type] = frozenset()
    cost: Any = None

    def __repr__(self) -> str:
        return f"<RequestState: {len(self.verdicts)} verdicts>"


#: The Django request :class:`~quotas.http.middleware.QuotaHeadersMiddleware` is handling in this context (its
#: thread, or its task), set around the view.
HANDLING: ContextVar[HttpRequest | None] = ContextVar("quotas_handling", default=None)


def state_of(request: Any) -> RequestState:
    """``request``'s state (DRF's request or Django's: the same one), made on first use."""
    meta = request.META
    state = meta.get(STATE_KEY)
    if state is None:
        state = meta[STATE_KEY] = RequestState()
    return state


def state_in(request: Any) -> RequestState | None:
    """``request``'s state, or None when nothing was left on it (or it has no ``META``)."""
    meta = getattr(request, "META", None)
    return None if meta is None else meta.get(STATE_KEY)


def add_verdict(request: Any, verdict: Verdict) -> None:
    """Leave ``verdict`` on the request, after those already there (headers, settling after the view)."""
    state_of(request).verdicts.append(verdict)


def verdicts_of(request: Any) -> list[Verdict]:
    """The verdicts left on ``request``, in the order they were made (empty if none)."""
    state = state_in(request)
    return [] if state is None else state.verdicts


def take_verdicts(request: Any) -> list[Verdict]:
    """The verdicts left on ``request``, taken off it (settled now: nothing settles them again)."""
    state = state_in(request)
    if state is None:
        return []
    verdicts, state.verdicts = state.verdicts, []
    return verdicts


def verdict_of(request: Any) -> Verdict | None:
    """The first verdict left on ``request`` (the one that priced it), if any."""
    verdicts = verdicts_of(request)
    return verdicts[0] if verdicts else None
