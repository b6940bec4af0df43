"""``@quota_limited``: the plans and engine of QuotaThrottle, for one plain Django view."""

from __future__ import annotations

import functools
from collections.abc import Callable
from inspect import iscoroutinefunction
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse

from quotas.conf import quota_settings
from quotas.django.guard import check, check_async, settled, view_rule


def quota_limited(
    scope: str = "", *, rate: str | None = None, weight: int | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Limit a Django view (a function; ``method_decorator`` for a class) like a DRF view with ``quota_scope``.

    ``scope`` selects the plan's limits (and ``DEFAULT_THROTTLE_RATES[scope]``
    while no plan exists); ``rate`` (``"5/min"``) adds a limit of its own that
    applies whatever the plans say; ``weight`` spends that many units per
    request. A refusal is a problem+json response (429 with ``Retry-After``
    and ``RateLimit`` headers) and the view is not run; an admitted response
    carries the headers, and the decision is settled after the view. Works on
    ``async def`` views too (the decision is awaited from redis-py's asyncio client).

    Raises :class:`~quotas.exceptions.InvalidRate` for a malformed ``rate``, and
    ValueError for a weight out of bounds, when the view is decorated.
    """
    if rate is not None:
        view_rule(scope, rate, quota_settings.DEFAULT_ALGORITHM)  # a malformed rate fails at import, not per request
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int) or weight < 0):
        raise ValueError(f"quota_limited(weight={weight!r}): a weight is an int from 0 up.")

    def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
        # An exception from the view becomes its response (404, 403, 500, ...) here, as in Django's
        # middleware chain, so the decision is settled whatever the view did.
        run: Callable[..., Any] = convert_exception_to_response(view)
        if iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                refused = await check_async(request, scope, rate, weight)
                response = refused if refused is not None else await run(request, *args, **kwargs)
                # Settling (refunds, actual costs, leases) is QuotaHeadersMiddleware's synchronous code.
                return await sync_to_async(settled)(request, lambda _request: response)

            return async_limited

        @functools.wraps(view)
        def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            refused = check(request, scope, rate, weight)
            if refused is not None:
                return settled(request, lambda _request: refused)
            return settled(request, lambda _request: run(request, *args, **kwargs))

        return limited

    return decorator
