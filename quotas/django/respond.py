"""The quota check of a plain Django request: build its :class:`~quotas.decide.Facts`, answer its verdict.

What :class:`~quotas.drf.throttling.QuotaThrottle` does for DRF, for views
that are not DRF's (:func:`~quotas.django.decorators.quota_limited`,
:class:`~quotas.django.middleware.PathQuotaMiddleware`). The windows that apply:

- the client's plan's limits matching the ``scope`` (or the path and method),
  as for a DRF view with that ``quota_scope``;
- a ``rate`` given in code (``"5/min"``) applies as well, plans or not: a
  login form keeps its limit whatever the plans say. It is counted like the
  same string in DRF's settings (``QUOTAS['DRF_ALGORITHM']``) unless an
  ``algorithm`` says otherwise;
- for a client no plan covers, without a ``rate``, ``REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'][scope]``.

DRF is not imported: these views may live in a project without it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse

from quotas.decide import Facts, Verdict, check, check_async, identified, settle
from quotas.engine import Engine, default_engine
from quotas.http import responses
from quotas.http.middleware import after_view
from quotas.identity.addresses import address_group
from quotas.identity.clients import Client
from quotas.rules.limits import LimitRule, code_rate_algorithm, code_rule, drf_scope_rule
from quotas.settings import ALGORITHMS

#: What ``key=`` accepts besides a callable: the client as identified (None), its address, its user,
#: or the value of a request header (``"header:X-Tenant"``).
KEYS = ("ip", "user")


def facts_for(
    request: HttpRequest,
    scope: str,
    rate: str | None = None,
    *,
    weight: int | None = None,
    algorithm: str | None = None,
    group: str | None = None,
) -> Facts:
    """The facts of a plain Django ``request`` (see the module docstring).

    ``group`` names the counters a ``rate`` spends (views of one group share them); a ``key=`` counting the
    request for another client than the one identified goes to :func:`gate`.
    """
    limits: tuple[LimitRule, ...] = ()
    fallback: tuple[LimitRule, ...] = ()
    if rate:
        # Headers and problems name the limit by its scope, else by the view's own name.
        limits = (rate_rule(group or scope, rate, algorithm, name=scope or (group or "").rsplit(".", 1)[-1]),)
    elif scope:
        rule = drf_scope_rule(scope, algorithm=algorithm)
        fallback = (rule,) if rule is not None else ()
    return Facts(
        http_request=request,
        request=request,
        user=getattr(request, "user", None),  # Django's AuthenticationMiddleware; no DRF authentication here
        scope=scope,
        limits=limits,
        fallback=fallback,
        weight=weight,
    )


def rate_rule(group: str, rate: str, algorithm: str | None = None, name: str | None = None) -> LimitRule:
    """The limit of a ``rate`` given in code (its counters named by ``group``), counted like DRF's rates
    unless ``algorithm`` says otherwise.

    Raises :class:`~quotas.exceptions.InvalidRate` for a malformed rate, ValueError for an unknown algorithm.
    """
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r} is not an algorithm: choose one of {', '.join(ALGORITHMS)}.")
    return code_rule(f"view.{group or '-'}", name or group or "view", rate, algorithm or code_rate_algorithm())


#: A front door's answer to a verdict before the view runs: the response that replaces the view's, or None to
#: run the view (:func:`refusal` answers every refusal; ``@quota_limited(block=False)`` and GraphQL answer
#: otherwise).
Refuse = Callable[[HttpRequest, Verdict], HttpResponse | None]


def gate(
    request: HttpRequest,
    facts: Facts,
    view: Callable[[], HttpResponse],
    *,
    key: str | Callable[[HttpRequest], Any] | None = None,
    refuse: Refuse | None = None,
    engine: Engine = default_engine,
) -> HttpResponse:
    """Check, then refuse or respond: the one sync path of every plain-Django front door (``@quota_limited``,
    ``PathQuotaMiddleware``, GraphQL); :func:`agate` is the same for async.

    The request is decided from ``facts`` (counted as ``key=`` says, see :func:`counted_as`); the response
    ``refuse`` gives (by default :func:`refusal`) replaces the view's, else ``view()`` answers. Either is
    settled (a streamed body's when it ends) and carries the rate-limit headers; a view that raises is settled
    as a failed request (refund, estimate released, leases ended) before the exception goes on. ``engine``
    decides (:data:`~quotas.engine.default_engine` unless the front door holds another).
    """
    verdict = _checked(engine, request, facts, key)
    refused = (refuse or refusal)(request, verdict)
    if refused is not None:
        return after_view(request, refused, [verdict])
    try:
        response = view()
    except BaseException:
        settle(verdict, HTTPStatus.INTERNAL_SERVER_ERROR)
        raise
    return after_view(request, response, [verdict])


async def agate(
    request: HttpRequest,
    facts: Facts,
    view: Callable[[], Awaitable[HttpResponse]],
    *,
    key: str | Callable[[HttpRequest], Any] | None = None,
    refuse: Refuse | None = None,
    engine: Engine = default_engine,
) -> HttpResponse:
    """:func:`gate` for an async view: the decision is awaited (redis-py's asyncio client); what may block
    (identifying a client counted otherwise, settling, which may call Redis) runs in asgiref's worker thread.

    ``BaseException`` includes the ``CancelledError`` of a client that went away mid-request (Django cancels
    the view then): its concurrency lease is released at once, not when it expires.
    """
    verdict = await _achecked(engine, request, facts, key)
    refused = (refuse or refusal)(request, verdict)
    if refused is not None:
        return await sync_to_async(after_view)(request, refused, [verdict])
    try:
        response = await view()
    except BaseException:
        await sync_to_async(settle)(verdict, HTTPStatus.INTERNAL_SERVER_ERROR)
        raise
    return await sync_to_async(after_view)(request, response, [verdict])


def refusal(request: HttpRequest, verdict: Verdict) -> HttpResponse | None:
    """The problem+json response of a refused ``verdict`` (429, 401, 403 or 503, its Retry-After set), or None
    for an admitted one. The verdict is never left on the request, so a QuotaHeadersMiddleware in MIDDLEWARE
    does not settle it twice."""
    exc = verdict.refusal
    if exc is None:
        return None
    return responses.refusal_response(exc.problem, exc.status_code, exc.wait)


def _checked(
    engine: Engine, request: HttpRequest, facts: Facts, key: str | Callable[[HttpRequest], Any] | None
) -> Verdict:
    """:func:`~quotas.decide.check` of ``facts``; with a ``key=``, the client is identified first and counted
    as the key says (data for the service, which never calls back), and a request whose key function gives
    None is admitted without a decision. It may read the database (an API key): sync code only."""
    if key is None:
        return check(engine, facts)
    found = identified(engine, facts)
    if isinstance(found, Verdict):
        return found  # limits off, or answered without a decision (a bad API key, out of bounds)
    client = counted_as(request, key, found)
    if client is None:
        return Verdict(request=facts.request)  # the key function said: not limited
    facts.client = client
    return check(engine, facts)


async def _achecked(
    engine: Engine, request: HttpRequest, facts: Facts, key: str | Callable[[HttpRequest], Any] | None
) -> Verdict:
    """:func:`_checked` for an async view: identifying the client and the key function run in asgiref's worker
    thread (either may read the database), the decision is awaited."""
    if key is None:
        return await check_async(engine, facts)
    found = await sync_to_async(identified)(engine, facts)
    if isinstance(found, Verdict):
        return found
    client = await sync_to_async(counted_as)(request, key, found)
    if client is None:
        return Verdict(request=facts.request)
    facts.client = client
    return await check_async(engine, facts)


def counted_as(request: HttpRequest, key: str | Callable[[HttpRequest], Any], client: Client) -> Client | None:
    """The client a decorator's ``key=`` (see :data:`KEYS`) counts ``request`` as, ``client`` being the one
    identified (the plan stays its); None for a key function that says the request is not limited."""
    if callable(key):
        value = key(request)
        if value is None:
            return None
        return Client.of_key(value, client.subscriber)
    user = getattr(request, "user", None)
    if key == "user" and user is not None and user.is_authenticated:
        return Client.of_user(user.pk, client.subscriber)
    if key.startswith("header:"):
        value = request.headers.get(key.removeprefix("header:"))
        if value:
            return Client.of_key(value, client.subscriber)
        return client  # no header: counted as the client it is
    group = address_group(request)  # "ip", and "user" for an anonymous request
    return Client.of_address(group, client.subscriber)
