"""The DRF adapter: :class:`QuotaThrottle`, for ``throttle_classes``.

It keeps DRF's hooks (``allow_request``, ``wait``) and delegates the rest:
identity -> rules snapshot -> one engine call. The decision is attached to
the request; :class:`quotas.middleware.QuotaHeadersMiddleware` turns it into
headers and, on a refusal, a problem+json body.
"""

from __future__ import annotations

import logging
import time
import uuid
from functools import lru_cache
from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from . import problems, shaping
from .acl import ACLRule
from .alerts import fire_budget_alerts, report_ban
from .conf import quota_settings
from .context import Decided, set_decided, set_problem
from .decision import Decision
from .engine import get_engine
from .exceptions import (
    AccessDenied,
    InvalidAPIKey,
    InvalidQuotaRequest,
    QuotaServiceUnavailable,
    ReducedCapacity,
    StoreUnavailable,
)
from .identity import Client, client_ip, identify
from .keys import encode_part
from .money import to_micros
from .observe import record_acl, record_decision
from .rates import parse_rates
from .rules import LimitRule, RuleSet, Window

logger = logging.getLogger(__name__)


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
        started = time.perf_counter()
        self._wait = None
        http_request = request._request
        engine = get_engine()
        rules = engine.rules.current()
        try:
            client = identify(http_request, request.user, engine.rules)
        except InvalidAPIKey as exc:
            set_problem(http_request, exc.problem)
            raise
        if client.subscriber is not None:
            engine.key_use.touch(client.subscriber.key_id)  # written to Redis by the poller (quotas/key_use.py)
        plan_id, windows = self.get_windows(rules, client, request, view)
        scope = getattr(view, "quota_scope", None) or ""
        usage = _usage_field(plan_id, scope)
        plan = rules.plans.get(plan_id) if plan_id is not None else None
        if rules.acl:
            entry = self.match_acl(rules, client, request, scope)
            if entry is not None:
                record_acl(request, entry.action == "allow", client.tag, plan.slug if plan else None, scope, entry.id,
                           started)  # fmt: skip
                cost = self.get_cost(rules, plan_id, client, request, view, scope) if entry.action == "allow" else 0
                decision = self.apply_acl(entry, engine, client, request, view, usage, cost)
                if decision is not None:
                    self.keep(http_request, decision, plan_id, client, request)
                return True
        cost = self.get_cost(rules, plan_id, client, request, view, scope) if windows or not rules.empty else 0
        if not windows:
            if not rules.empty:
                # Nothing limits this request (e.g. an unlimited override), but usage still counts it.
                decision = self.count_unlimited(engine, client, request, view, usage, cost)
                self.keep(http_request, decision, plan_id, client, request)
            return True
        multiplier = engine.rules.multipliers.get(plan_id, 1.0) if plan_id is not None else 1.0
        # Concurrency leases are named by the request, so the middleware can end them.
        request_id = uuid.uuid4().hex if any(w.algorithm == "concurrency" for w in windows) else ""
        try:
            decision = engine.decide(
                client.tag,
                windows,
                self.get_weight(request, view),
                cost_micros=cost,
                usage=usage,
                multiplier=multiplier,
                ban_policy=plan.ban_policy if plan is not None else "",
                request_id=request_id,
            )
        except StoreUnavailable:
            mode = quota_settings.FAILURE_MODE
            if mode == "closed":
                raise QuotaServiceUnavailable(set_problem(http_request, problems.store_unavailable())) from None
            if mode == "open":
                return True
            # "local": this process enforces its share of the same limits until Redis is back.
            weight = self.get_weight(request, view)
            decision = engine.decide_locally(client.tag, windows, weight, cost, usage, multiplier)
        self.keep(http_request, decision, plan_id, client, request)
        for state in decision.would_deny():
            logger.info("quotas: shadow limit %r would have refused %s", state.window.policy, client.tag)
        fire_budget_alerts(client, decision.states)
        if decision.ban_started:
            report_ban(client, decision, plan)
        record_decision(request, decision, client.tag, plan.slug if plan else None, scope, started)
        if decision.allowed:
            if decision.delay > 0:
                # A shaping leaky bucket: hold the request until its turn (<= max_delay), if this
                # process has sleep to spare (quotas/shaping.py); else refuse it and take it back.
                wait = shaping.budget.take(decision.delay)
                if wait:
                    engine.withdraw(decision)
                    self._wait = shaping.retry_after(decision.delay, wait)
                    set_problem(http_request, problems.shaping_unavailable(self._wait))
                    return False
                time.sleep(decision.delay)
            return True
        self._wait = decision.retry_after
        if decision.reduced_only:
            # Refused only because limits are reduced under load: 503, as the draft asks.
            problem = set_problem(http_request, problems.reduced_capacity(decision))
            raise ReducedCapacity(problem, wait=decision.retry_after)
        return False

    def count_unlimited(
        self, engine: Any, client: Client, request: Request, view: Any, usage: str, cost: int
    ) -> Decision:
        """Count an admitted request that no limit applies to (one script call, usage only)."""
        weight = self.get_weight(request, view)
        try:
            return engine.decide(client.tag, (), weight, cost_micros=cost, usage=usage)
        except StoreUnavailable:
            # Admitted whatever the failure mode (no limit applies); its usage waits in-process.
            return engine.decide_locally(client.tag, (), weight, cost, usage)

    @staticmethod
    def keep(http_request: Any, decision: Decision, plan_id: int | None, client: Client, request: Request) -> None:
        """Leave ``decision`` on the request for the middleware (headers, cost reconciliation, leases)."""
        set_decided(http_request, Decided(decision, client, plan_id, request))

    def match_acl(self, rules: RuleSet, client: Client, request: Request, scope: str) -> ACLRule | None:
        """The allow or deny entry for this request (an in-process lookup, no Redis)."""
        subscriber = client.subscriber
        user = request.user
        return rules.acl.match(
            key_id=subscriber.key_id if subscriber else None,
            subscription_id=subscriber.id if subscriber else None,
            user_id=user.pk if user is not None and user.is_authenticated else None,
            ip=client_ip(request._request),
            scope=scope,
            now=time.time(),
        )

    def apply_acl(
        self, entry: ACLRule, engine: Any, client: Client, request: Request, view: Any, usage: str, cost: int
    ) -> Decision | None:
        """Allow entries skip limits and budgets; deny entries refuse with 403. Both are counted.

        An allowed request is counted with its estimated ``cost`` like any
        other, and the returned decision is reconciled after the view.
        """
        allowed = entry.action == "allow"
        weight = self.get_weight(request, view) if allowed else None
        decision = engine.count_acl(client.tag, usage, allowed, weight, cost)
        if allowed:
            return decision
        problem = problems.access_denied(entry, time.time())
        set_problem(request._request, problem)
        logger.info("quotas: deny-list entry %s refused %s", entry.id, client.tag)
        raise AccessDenied(problem, wait=problem.get("retry_after"))

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

    def get_cost(
        self, rules: RuleSet, plan_id: int | None, client: Client, request: Request, view: Any, scope: str
    ) -> int:
        """The estimated cost of this request in micro-units.

        The view's ``get_quota_cost(request)`` (a Decimal) when it has one,
        else the sum of the prices of the limits the request matches.
        """
        http_request = request._request
        estimate = getattr(view, "get_quota_cost", None)
        amount = estimate(request) if estimate is not None else None
        if amount is None:
            return rules.price_micros(
                plan_id, client.subscriber, scope, http_request.path, http_request.method or "GET"
            )
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
            problem = problems.out_of_bounds("cost", amount, quota_settings.MAX_REQUEST_COST)
            raise InvalidQuotaRequest(set_problem(http_request, problem))
        return micros

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
            problem = problems.out_of_bounds("weight", weight, quota_settings.MAX_REQUEST_WEIGHT)
            raise InvalidQuotaRequest(set_problem(request._request, problem))
        return weight


@lru_cache(maxsize=1024)
def _usage_field(plan_id: int | None, scope: str) -> str:
    # "<plan>|<scope>": the usage counters a decision is counted under (scopes come from views, so few).
    return f"{'-' if plan_id is None else plan_id}|{encode_part(scope) if scope else '-'}"


@lru_cache(maxsize=256)
def _drf_rule(scope: str, rate: str, algorithm: str) -> LimitRule:
    return LimitRule(id=f"drf.{scope}", name=scope, rates=parse_rates(rate), algorithm=algorithm)
