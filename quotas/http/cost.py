"""Priced requests: how a view reports what a request actually cost.

A view may estimate a request's cost before it runs (``get_quota_cost``,
see :class:`quotas.drf.throttling.QuotaThrottle`) and report the actual cost
after it ran, by setting ``request.quota_cost`` (a Decimal, on DRF's request)
or calling :func:`set_cost`. The middleware then charges the difference to
the client's budgets, exactly once; a view that fails is charged nothing. A
streamed response's cost is read when its body ends (its generator may set it
last), see :mod:`quotas.http.settlement`.

Between the decision and the reconciliation other requests of the client see
only the estimate, so a budget can be overspent by at most the sum, over the
client's requests in flight at once, of (actual - estimate) (with local allowances and several processes,
each process adds its own: docs/concepts.md, *Overspend window*). Estimate high,
or cap the actual cost a view reports, to keep that window small.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from quotas.formats.money import to_micros
from quotas.http.context import state_in, state_of
from quotas.settings import quota_settings

#: The request attribute a view reports the actual cost in, on DRF's request or Django's. The middleware looks
#: for it in the requests' ``__dict__`` itself, without a call (most requests report none).
COST_ATTRIBUTE = "quota_cost"


def set_cost(request: Any, amount: Decimal | int | str) -> None:
    """Record the actual cost of ``request`` (DRF or Django request): on it, and in its state, which DRF's request
    and Django's share (a verdict may hold either, :mod:`quotas.http.context`)."""
    setattr(request, COST_ATTRIBUTE, amount)
    state_of(request).cost = amount


def actual_cost(request: Any) -> int | None:
    """The actual cost a view reported, in micro-units, or None if it reported none."""
    if request is None:
        return None
    # On the request itself, or (DRF's request reads on from the Django request it wraps) on Django's, or given
    # to set_cost().
    amount = getattr(request, COST_ATTRIBUTE, None)
    if amount is None:
        state = state_in(request)
        amount = None if state is None else state.cost
    if amount is None:
        return None
    # Set by the view's code after it ran: out of bounds, it is a programming mistake, not the client's.
    try:
        micros = to_micros(amount)
    except (TypeError, ArithmeticError, ValueError) as exc:  # a float, NaN, "abc"
        raise TypeError(_misreported(request, amount)) from exc
    if not 0 <= micros <= to_micros(quota_settings.MAX_REQUEST_COST):
        raise ValueError(_misreported(request, amount))
    return micros


def _misreported(request: Any, amount: object) -> str:
    context = getattr(request, "parser_context", None) or {}  # DRF's Request knows its view
    view = context.get("view")
    name = type(view).__name__ if view is not None else _view_name(request)
    where = f"{name} set request.quota_cost" if name else "request.quota_cost is"
    return f"{where} {amount!r}; an actual cost is a Decimal from 0 to QUOTAS['MAX_REQUEST_COST']."


def _view_name(request: Any) -> str | None:
    """The name of the plain Django view that served ``request`` (its URL resolved to it), if known."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return None
    view = getattr(match.func, "view_class", match.func)  # a class-based view's as_view() names its class
    return getattr(view, "__name__", None)
