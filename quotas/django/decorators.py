"""``@quota_limited``: the plans and decision service of QuotaThrottle, for one plain Django view."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from inspect import iscoroutinefunction
from typing import Any

from django.http import HttpRequest, HttpResponse

from quotas.decide import Facts, Verdict
from quotas.django.respond import KEYS, agate, facts_for, gate, rate_rule, refusal
from quotas.engine import Engine, default_engine
from quotas.exceptions import QuotaExceeded, ReducedCapacity
from quotas.formats.rates import parse_rates
from quotas.settings import quota_settings


def quota_limited(  # noqa: PLR0913  (each a documented option, keyword-only)
    scope: str = "",
    *,
    rate: str | None = None,
    weight: int | None = None,
    algorithm: str | None = None,
    key: str | Callable[[HttpRequest], Any] | None = None,
    method: str | Iterable[str] | None = None,
    block: bool = True,
    group: str | None = None,
    engine: Engine | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Limit a Django view (a function; ``method_decorator`` for a class) like a DRF view with ``quota_scope``.

    - ``scope`` selects the plan's limits (and ``DEFAULT_THROTTLE_RATES[scope]``
      for a client no plan covers);
    - ``rate`` (``"5/min"``) adds a limit of its own that applies whatever the
      plans say, counted like the same string in DRF's settings
      (``QUOTAS['DRF_ALGORITHM']``) unless ``algorithm`` names another; each view
      has its own counters, unless views share a ``group``;
    - ``weight`` spends that many units per request;
    - ``key`` counts the request for someone else than the client identified:
      ``"ip"``, ``"user"``, ``"header:<name>"``, or a callable taking the
      request and returning a string (None: not limited); the plan stays the
      client's;
    - ``method`` (``"POST"`` or a list) limits only those methods;
    - ``block=False`` never refuses for a limit: the view runs with
      ``request.limited`` set to whether the request was over its limits (a bad
      API key or a deny-list entry is still answered);
    - ``engine`` is the :class:`~quotas.engine.Engine` that decides (the process's
      :data:`~quotas.engine.default_engine` unless given).

    A refusal is a problem+json response (429 with ``Retry-After`` and
    ``RateLimit`` headers) and the view is not run; an admitted response
    carries the headers, and the decision is settled after the view. An
    exception from the view propagates (``ATOMIC_REQUESTS`` rolls back,
    ``process_exception`` hooks run) after the decision is settled as a failed
    request's. Works on ``async def`` views too (the decision is awaited from
    redis-py's asyncio client).

    Raises :class:`~quotas.exceptions.InvalidRate` for a malformed ``rate``, and
    ValueError for another bad argument, when the view is decorated.
    """
    _check_weight_and_key(weight, key)
    methods = _methods(method)
    if rate is not None:
        parse_rates(rate)  # a malformed rate fails when the view is decorated, not per request

    def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
        own_group = group or f"{view.__module__}.{view.__qualname__}"  # each view counts on its own
        if rate is not None:
            rate_rule(own_group, rate, algorithm)  # a bad algorithm fails here too
        limit = _ViewLimit(scope, rate, weight, algorithm, key, methods, block, own_group, engine or default_engine)
        return _async_limited(view, limit) if iscoroutinefunction(view) else _limited(view, limit)

    return decorator


@dataclass(frozen=True, slots=True)
class _ViewLimit:
    """What ``@quota_limited`` asks of one view's requests (its arguments, checked; ``group`` filled in)."""

    scope: str
    rate: str | None
    weight: int | None
    algorithm: str | None
    key: str | Callable[[HttpRequest], Any] | None
    methods: frozenset[str] | None
    block: bool
    group: str
    engine: Engine

    def applies(self, request: HttpRequest) -> bool:
        """Whether ``request``'s method is one the view is limited for."""
        return self.methods is None or (request.method or "GET").upper() in self.methods

    def refusal(self, request: HttpRequest, verdict: Verdict) -> HttpResponse | None:
        """The response sent instead of running the view: a refusal's, but with ``block=False`` only for what
        is not a limit (a bad API key or a deny-list entry). A view that runs is told whether its request was
        over its limits (``request.limited``)."""
        if verdict.refusal is not None and (
            self.block or not isinstance(verdict.refusal, QuotaExceeded | ReducedCapacity)
        ):
            return refusal(request, verdict)
        request.limited = verdict.refusal is not None  # type: ignore[attr-defined]  # documented, not Django's
        return None

    def facts(self, request: HttpRequest) -> Facts:
        """What the service is told about ``request``."""
        return facts_for(request, self.scope, self.rate, weight=self.weight, algorithm=self.algorithm, group=self.group)


def _limited(view: Callable[..., HttpResponse], limit: _ViewLimit) -> Callable[..., HttpResponse]:
    """``view`` (a plain function) decided on before it runs and settled after."""

    @functools.wraps(view)
    def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not limit.applies(request):
            return view(request, *args, **kwargs)
        view_call = lambda: view(request, *args, **kwargs)  # noqa: E731
        return gate(request, limit.facts(request), view_call, key=limit.key, refuse=limit.refusal, engine=limit.engine)

    return limited


def _async_limited(view: Callable[..., Any], limit: _ViewLimit) -> Callable[..., Any]:
    """``view`` (an ``async def``) decided on before it runs, the decision awaited, and settled after."""

    @functools.wraps(view)
    async def async_limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not limit.applies(request):
            return await view(request, *args, **kwargs)
        view_call = lambda: view(request, *args, **kwargs)  # noqa: E731
        return await agate(
            request, limit.facts(request), view_call, key=limit.key, refuse=limit.refusal, engine=limit.engine
        )

    return async_limited


def _check_weight_and_key(weight: int | None, key: str | Callable[[HttpRequest], Any] | None) -> None:
    """Raise ValueError for a ``weight`` or a ``key`` ``@quota_limited`` cannot use."""
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int) or weight < 0):
        raise ValueError(f"quota_limited(weight={weight!r}): a weight is an int from 0 up.")
    if weight is not None and weight > quota_settings.MAX_REQUEST_WEIGHT:
        raise ValueError(
            f"quota_limited(weight={weight}): above QUOTAS['MAX_REQUEST_WEIGHT'] "
            f"({quota_settings.MAX_REQUEST_WEIGHT}), every request would be refused."
        )
    if isinstance(key, str) and key not in KEYS and not (key.startswith("header:") and len(key) > len("header:")):
        raise ValueError(f"quota_limited(key={key!r}): use 'ip', 'user', 'header:<name>' or a callable.")


def _methods(method: str | Iterable[str] | None) -> frozenset[str] | None:
    if method is None:
        return None
    names = frozenset(m.upper() for m in ([method] if isinstance(method, str) else method))
    if not names or not all(isinstance(m, str) and m.isalpha() for m in names):
        raise ValueError(f"quota_limited(method={method!r}): name HTTP methods, e.g. 'POST' or ['GET', 'HEAD'].")
    return names
