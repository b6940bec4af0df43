"""The quota check of a plain Django request: identify, gather windows, :func:`~quotas.admission.admit`.

What :class:`~quotas.drf.throttling.QuotaThrottle` does for DRF, for views
that are not DRF's. The windows that apply:

- with plans in the database, the client's plan's limits matching the
  ``scope`` (or the path and method), as for a DRF view with that ``quota_scope``;
- a ``rate`` given in code (``"5/min"``) applies as well, plans or not: a
  login form keeps its limit whatever the plans say;
- with no plans and no ``rate``, ``REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'][scope]``.

After the view, :func:`settled` runs it through
:class:`~quotas.http.middleware.QuotaHeadersMiddleware` (headers, refunds,
actual costs, concurrency leases).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from rest_framework.settings import api_settings

from quotas.admission import Admission, Ask, admit, admit_async
from quotas.conf import quota_settings
from quotas.drf.handlers import respond
from quotas.engine.core import Engine
from quotas.engine.runtime import get_engine
from quotas.exceptions import ProblemException
from quotas.http.context import set_decided
from quotas.http.middleware import QuotaHeadersMiddleware
from quotas.identity.clients import identify
from quotas.rules.rates import parse_rates
from quotas.rules.snapshot import LimitRule, RuleSet, Window


def check(request: HttpRequest, scope: str, rate: str | None = None, weight: int | None = None) -> HttpResponse | None:
    """None to admit ``request`` (its decision left on it for :func:`settled`), else the refusal to send.

    A refusal is the problem+json response of the exception the DRF throttle
    would raise: 429 for a limit, 401 for a bad API key, 403 for a deny-list
    entry, 503 under adaptive reduction or in the closed failure mode.
    """
    asked = ask_for(request, scope, rate, weight)
    if isinstance(asked, HttpResponse):
        return asked
    engine, rules, ask = asked
    return answer(request, admit(engine, rules, ask))


async def check_async(
    request: HttpRequest, scope: str, rate: str | None = None, weight: int | None = None
) -> HttpResponse | None:
    """:func:`check` for an async view: the decision is awaited from redis-py's asyncio client.

    Identifying the client may read the database (a reloaded rules snapshot,
    an API key not yet cached), so that step runs in asgiref's worker thread.
    """
    asked = await sync_to_async(ask_for)(request, scope, rate, weight)
    if isinstance(asked, HttpResponse):
        return asked
    engine, rules, ask = asked
    return answer(request, await admit_async(engine, rules, ask))


def ask_for(
    request: HttpRequest, scope: str, rate: str | None, weight: int | None
) -> tuple[Engine, RuleSet, Ask] | HttpResponse:
    """The engine, the rules and the :class:`Ask` of ``request``; or the 401/429 answer to a bad API key,
    the 503 answer while the rules cannot be read."""
    engine = get_engine()
    user = getattr(request, "user", None)  # Django's AuthenticationMiddleware; no DRF authentication here
    try:
        rules = engine.rules.current()
        client = identify(request, user, engine.rules)
    except ProblemException as exc:  # a bad API key, a blocked address, or rules the database cannot give
        return respond(exc.problem, exc)
    if client.subscriber is not None:
        engine.key_use.touch(client.subscriber.key_id)
    plan_id, windows = windows_for(rules, client.subscriber, request, scope, rate)
    authenticated = user is not None and user.is_authenticated
    ask = Ask(
        client,
        plan_id,
        windows,
        scope,
        request,
        request,
        user_id=user.pk if authenticated else None,  # type: ignore[union-attr]
        weight=weight,
    )
    return engine, rules, ask


def answer(request: HttpRequest, admission: Admission) -> HttpResponse | None:
    """Leave the decision on ``request``; the refusal's problem+json response, or None to admit."""
    if admission.decided is not None:
        set_decided(request, admission.decided)
    if admission.refusal is not None:
        return respond(admission.refusal.problem, admission.refusal)
    return None


def windows_for(
    rules: RuleSet, subscriber: Any, request: HttpRequest, scope: str, rate: str | None
) -> tuple[int | None, list[Window]]:
    """The plan id and every window that applies (see the module docstring)."""
    path, method = request.path, request.method or "GET"
    windows: list[Window] = []
    plan_id: int | None = None
    if not rules.empty:
        plan_id = subscriber.plan_id if subscriber is not None else rules.default_plan_id
        windows = rules.windows_for(plan_id, subscriber, scope, path, method)
    elif rate is None:
        drf_rates: dict[str, Any] = api_settings.DEFAULT_THROTTLE_RATES or {}
        rate = drf_rates.get(scope)
    if rate:
        windows += view_rule(scope, rate, quota_settings.DEFAULT_ALGORITHM).windows
    return plan_id, windows


@lru_cache(maxsize=256)
def view_rule(scope: str, rate: str, algorithm: str) -> LimitRule:
    """The limit of a ``rate`` given in code (compiled once: a LimitRule parses its rates when built).

    Raises :class:`~quotas.exceptions.InvalidRate` for a malformed rate.
    """
    return LimitRule(id=f"view.{scope or '-'}", name=scope or "view", rates=parse_rates(rate), algorithm=algorithm)


def settled(request: HttpRequest, get_response: Callable[[HttpRequest], HttpResponse]) -> HttpResponse:
    """``get_response(request)`` with the decision settled and the rate-limit headers added.

    Reuses :class:`QuotaHeadersMiddleware`, then takes the decision off the
    request, so a QuotaHeadersMiddleware in MIDDLEWARE does not settle it twice.
    """
    response = QuotaHeadersMiddleware(get_response)(request)
    set_decided(request, None)
    return response
