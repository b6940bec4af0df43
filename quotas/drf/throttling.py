"""The DRF throttle: :class:`QuotaThrottle`, for ``throttle_classes``.

It keeps DRF's hooks (``allow_request``, ``wait``) and does three things:
identify the client, gather the windows that apply, and ask
:func:`quotas.admission.admit`. A refusal is raised as the DRF exception it
is (a :class:`~rest_framework.exceptions.Throttled` for a 429) carrying its
problem+json body; the decision is left on the request for
:class:`quotas.http.middleware.QuotaHeadersMiddleware` (headers, settling after
the view).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from quotas.admission import Ask, admit
from quotas.conf import quota_settings
from quotas.engine.runtime import get_engine
from quotas.exceptions import InvalidQuotaRequest
from quotas.http import problems
from quotas.http.context import set_decided
from quotas.identity.clients import Client, identify
from quotas.rules.money import to_micros
from quotas.rules.rates import parse_rates
from quotas.rules.snapshot import LimitRule, RuleSet, Window


class QuotaThrottle(BaseThrottle):
    """Enforces the caller's plan limits (or DRF's own rates) from Redis.

    With plans in the database, a request is checked against its plan's
    limits that match the view's ``quota_scope``, the path and the method.
    With no plans, it honours DRF's configuration like DRF's throttles do:
    a ``rate`` (or ``scope``) attribute on a subclass, else the view's
    ``throttle_scope``, else the ``user``/``anon`` rates, all looked up in
    ``REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']``.

    A view may set ``quota_weight`` (an int) or define
    ``get_quota_weight(request)`` to spend more than one unit per request,
    and define ``get_quota_cost(request)`` (a Decimal) to estimate its cost.
    Above ``MAX_REQUEST_WEIGHT`` / ``MAX_REQUEST_COST`` the request is refused
    with a 400 problem before Redis is asked; a negative value or one of the
    wrong type is the view's mistake: a ValueError or TypeError naming it.
    """

    rate: str | None = None
    scope: str | None = None

    def __init__(self) -> None:
        self._wait: int | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        """True to admit; a refusal raises its DRF exception (429 :class:`~quotas.exceptions.QuotaExceeded`,
        403, 503) after leaving the decision on the request for the headers."""
        self._wait = None
        http_request = request._request
        engine = get_engine()
        rules = engine.rules.current()
        client = identify(http_request, request.user, engine.rules, request.auth)
        if client.subscriber is not None:
            engine.key_use.touch(client.subscriber.key_id)  # written to Redis by the poller (quotas/engine/key_use.py)
        plan_id, windows = self.get_windows(rules, client, request, view)
        user = request.user
        ask = Ask(
            client,
            plan_id,
            windows,
            getattr(view, "quota_scope", None) or "",
            http_request,
            request,
            user_id=user.pk if user is not None and user.is_authenticated else None,
            weight=self.get_weight(request, view),
            cost_micros=self.get_cost(request, view),
        )
        admission = admit(engine, rules, ask)
        if admission.decided is not None:
            set_decided(http_request, admission.decided)
        if admission.refusal is not None:
            self._wait = admission.refusal.wait
            raise admission.refusal
        return True

    def wait(self) -> int | None:
        """Seconds until the refused request would be admitted (DRF's hook)."""
        return self._wait

    def get_windows(
        self, rules: RuleSet, client: Client, request: Request, view: Any
    ) -> tuple[int | None, list[Window]]:
        """The plan id and every window that applies to this request."""
        http_request = request._request  # DRF proxies .path/.method through a slow __getattr__
        scope = getattr(view, "quota_scope", None) or ""
        path, method = http_request.path, http_request.method or "GET"
        if rules.empty:
            limits = self.get_drf_limits(request, view)
            return None, [w for rule in limits if rule.matches(scope, path, method) for w in rule.windows]
        plan_id = client.subscriber.plan_id if client.subscriber is not None else rules.default_plan_id
        return plan_id, rules.windows_for(plan_id, client.subscriber, scope, path, method)

    def get_drf_limits(self, request: Request, view: Any) -> tuple[LimitRule, ...]:
        """DRF-compatible limits, used while no plan exists in the database."""
        rates: dict[str, Any] = api_settings.DEFAULT_THROTTLE_RATES or {}
        scope: str | None = self.scope or getattr(view, "throttle_scope", None)
        rate: str | None
        if self.rate:
            rate, scope = self.rate, scope or type(self).__name__.lower()
        elif scope:
            rate = rates.get(scope)
        else:
            scope = "user" if request.user and request.user.is_authenticated else "anon"
            rate = rates.get(scope)
        if not rate:
            return ()
        return (_drf_rule(scope, rate, quota_settings.DEFAULT_ALGORITHM),)

    def get_cost(self, request: Request, view: Any) -> int | None:
        """The view's estimate of this request's cost in micro-units (``get_quota_cost``), or None.

        None lets the limits' prices decide. Out of bounds is a 400 problem.
        """
        estimate = getattr(view, "get_quota_cost", None)
        amount = estimate(request) if estimate is not None else None
        if amount is None:
            return None
        try:
            micros = to_micros(amount)
        except (TypeError, ArithmeticError, ValueError) as exc:  # a float, NaN, "abc": the view's mistake
            raise TypeError(
                f"{type(view).__name__}.get_quota_cost() gave {amount!r}; a cost is a Decimal from 0 to "
                "QUOTAS['MAX_REQUEST_COST']."
            ) from exc
        # Out of range is most often the request's own number passed through (?est=-1): a 400 naming
        # the bounds, before Redis is asked (a negative estimate would credit the client's budgets).
        if not 0 <= micros <= to_micros(quota_settings.MAX_REQUEST_COST):
            raise InvalidQuotaRequest(problems.out_of_bounds("cost", amount, quota_settings.MAX_REQUEST_COST))
        return micros

    def get_weight(self, request: Request, view: Any) -> int | None:
        """The view's weight for this request, or None for each limit's own weight."""
        getter = getattr(view, "get_quota_weight", None)
        weight = getter(request) if getter is not None else getattr(view, "quota_weight", None)
        if weight is None:
            return None
        # Checked before any Redis call: an enormous weight would make the script fail, and the
        # failure would be Redis's, not this request's.
        if isinstance(weight, bool) or not isinstance(weight, int):
            # Not a number at all: the view's mistake, whatever the request said.
            hook = "get_quota_weight()" if getter is not None else "quota_weight"
            raise TypeError(
                f"{type(view).__name__}.{hook} gave {weight!r}; a quota weight is an int from 0 to "
                "QUOTAS['MAX_REQUEST_WEIGHT'] (validate the request's input in the view)."
            )
        if not 0 <= weight <= quota_settings.MAX_REQUEST_WEIGHT:
            # Out of range (a negative weight would give units back): most often the request's own
            # number passed through, so a 400 naming the bounds rather than a server error.
            raise InvalidQuotaRequest(problems.out_of_bounds("weight", weight, quota_settings.MAX_REQUEST_WEIGHT))
        return weight


@lru_cache(maxsize=256)
def _drf_rule(scope: str, rate: str, algorithm: str) -> LimitRule:
    # A LimitRule compiles its windows (rate parsing, spec packing) when built; DRF's rates rarely change.
    return LimitRule(id=f"drf.{scope}", name=scope, rates=parse_rates(rate), algorithm=algorithm)
