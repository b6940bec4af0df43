"""The decision service: one request's quota verdict, whichever front door it came through.

Every adapter (the DRF throttle, ``@quota_limited``, ``PathQuotaMiddleware``,
their async forms) only builds the :class:`Facts` of a request and turns the
:class:`Verdict` into its framework's answer. Everything else happens here,
once, in this order:

1. the rules snapshot and the client (API key, user or address; an adapter
   that counts the request as someone else resolves it first, :func:`identified`);
2. the windows: the client's plan's limits matching the scope, path and
   method, else the adapter's fallback limits (DRF's rates), plus the limits
   the code gave;
3. allow and deny lists (in process, no Redis);
4. every window in one store call, or the failure mode when Redis is down;
5. audit and metrics, a refusal's budget alerts, ban reports;
6. a shaping leaky bucket's delay.

After the view, :func:`settle` refunds a server error where a limit asks for
it, charges the actual cost the view reported, sends the budget alerts of the
spend then settled, and ends concurrency leases.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from quotas import problems
from quotas.conf import quota_settings
from quotas.contract.keys import encode_part
from quotas.exceptions import (
    AccessDenied,
    InvalidQuotaRequest,
    ProblemException,
    QuotaExceeded,
    QuotaServiceUnavailable,
    ReducedCapacity,
    StoreUnavailable,
)
from quotas.formats.acl import ACLRule
from quotas.formats.money import from_micros, to_micros
from quotas.identity.addresses import client_ip
from quotas.identity.clients import Client, identify
from quotas.identity.countries import request_country
from quotas.observability.events import fire_budget_alerts, report_ban
from quotas.observability.record import record_acl, record_decision
from quotas.rules.limits import LimitRule, Window
from quotas.rules.snapshot import PlanRules, RequestRules, RuleSet
from quotas.runtime import Runtime, get_runtime, shaping
from quotas.store.decision import DecideCall, Decision

logger = logging.getLogger(__name__)


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, a few
# microseconds per request on the hot path for a guarantee nothing here needs.
@dataclass(slots=True)
class Facts:
    """What an adapter knows about one request.

    ``request`` is the framework's request (DRF's, or Django's): where the view
    reports its actual cost, and what the audit log describes. ``auth`` is what
    authentication found (DRF's ``request.auth``). ``limits`` are limits the
    code gave (a decorator's ``rate``), which apply whatever the plans say;
    ``fallback`` are the limits of a client no plan covers (DRF's rates).
    ``weight`` overrides each window's own weight; ``cost_micros`` is the
    view's estimate, or None for the limits' prices; ``price_per_unit``
    charges the limits' prices once per unit of ``weight`` rather than once
    per request (a GraphQL query priced by its complexity, quotas.graphql).

    For an API's own housekeeping views (the usage API), limited apart from
    the API they serve: ``scope_limits_only`` applies only the plan's limits
    that name ``scope`` (with none, the ``fallback`` limits), never its
    plan-wide, path or budget limits; ``metered`` False counts the decision
    neither in the client's usage, nor in the history of plans and scopes,
    nor toward its plan's bans (metrics, the audit log and the last refusals
    still see it).

    ``priced`` False is a further decision on a request another decision
    already priced (a second throttle class of the view, counting clients
    otherwise): only its rate windows, at no cost, no budget, and not counted
    in usage again.

    ``client`` is the client whose counters the request spends, when the
    adapter resolved it itself (DRF's ``get_cache_key``, a decorator's
    ``key=``: see :func:`identified`); None lets the service identify it.
    """

    http_request: HttpRequest
    request: Any = None
    user: Any = None
    auth: Any = None
    scope: str = ""
    limits: tuple[LimitRule, ...] = ()
    fallback: tuple[LimitRule, ...] = ()
    weight: int | None = None
    cost_micros: int | None = None
    price_per_unit: bool = False
    client: Client | None = None
    scope_limits_only: bool = False
    metered: bool = True
    priced: bool = True


@dataclass(slots=True)
class Verdict:
    """What :func:`check` decided: the decision to settle after the view, and the refusal to answer with.

    ``decision`` is None when nothing was decided (no limit applies and no
    plan exists, the request is not limited, or limits are off); ``refusal``
    is None when the request is admitted.
    """

    client: Client | None = None
    plan_id: int | None = None
    decision: Decision | None = None
    refusal: ProblemException | None = None
    request: Any = None

    @property
    def allowed(self) -> bool:
        """Whether the request may go on to the view."""
        return self.refusal is None


class Call(DecideCall):
    """One request's store call, resolved from its facts against the compiled rules: what the store is asked
    (it is a :class:`~quotas.store.decision.DecideCall`) with what the service needs around it, so a request
    keeps this one shape from the rules to the reply."""

    __slots__ = ("client", "facts", "plan", "plan_id", "rules", "runtime", "started", "store_seconds")

    def __init__(  # noqa: PLR0913, PLR0917
        self,
        facts: Facts,
        runtime: Runtime,
        rules: RuleSet,
        client: Client,
        plan_id: int | None,
        windows: Sequence[Window],
        cost: int,
        usage: str,
        started: float,
    ) -> None:
        plan = rules.plans.get(plan_id) if plan_id is not None else None
        # Concurrency leases are named by the request, so settling can end them.
        request_id = uuid.uuid4().hex if any(w.algorithm == "concurrency" for w in windows) else ""
        DecideCall.__init__(
            self, client.tag, windows, facts.weight, None, cost, usage, False,
            runtime.multipliers.get(plan_id),  # the adaptive multiplier of the plan (1.0 without one)
            plan.ban_policy if plan is not None and facts.metered else "",
            request_id,
            # An allowance charges each request the limits' price; a view's own estimate varies per request.
            facts.cost_micros is None and (plan is None or plan.local_allowances),
        )  # fmt: skip
        self.facts = facts
        self.runtime = runtime
        self.rules = rules
        self.client = client
        self.plan_id = plan_id
        self.plan = plan
        self.started = started
        self.store_seconds = 0.0  # the store call's time (OpenTelemetry's span and histogram)


def check(facts: Facts) -> Verdict:
    """The verdict on one request (see the module docstring); a refusal is returned, never raised."""
    started = time.perf_counter()
    if not quota_settings.ENABLED:
        return Verdict(request=facts.request)
    try:
        call = _prepare(facts, started)
        if isinstance(call, Verdict):
            return call
        sent = time.perf_counter()
        try:
            decision = call.runtime.guard.decide_call(call)
        except StoreUnavailable:
            return _conclude(call, _fail(call))
        call.store_seconds = time.perf_counter() - sent
        return _conclude(call, decision)
    except ProblemException as exc:  # a bad API key, a blocked address, rules the database cannot give
        return Verdict(refusal=exc, request=facts.request)


async def check_async(facts: Facts) -> Verdict:
    """:func:`check` for an async view: the store call awaits redis-py's asyncio client.

    The steps around it may block (the rules snapshot and an API key may be read
    from the database, audit, budget alerts, a shaping delay): they run in
    asgiref's worker thread.
    """
    if not quota_settings.ENABLED:
        return Verdict(request=facts.request)
    try:
        call = await sync_to_async(_prepare)(facts, time.perf_counter())
    except ProblemException as exc:
        return Verdict(refusal=exc, request=facts.request)
    if isinstance(call, Verdict):
        return call
    sent = time.perf_counter()
    try:
        decision: Decision | Verdict = await call.runtime.guard.adecide(call)
        call.store_seconds = time.perf_counter() - sent
    except StoreUnavailable:
        decision = _fail(call)
    return await sync_to_async(_conclude)(call, decision)


def identified(facts: Facts) -> Client | Verdict:
    """For an adapter that counts a request as another client (DRF's ``get_cache_key``, a decorator's
    ``key=``): the client the request is identified as (API key, user or address), which the adapter then
    sets as ``facts.client``; or the verdict of a request answered without a decision (limits off, a bad
    API key, a weight or cost out of bounds). It may read the database (an API key): sync code only."""
    if not quota_settings.ENABLED:
        return Verdict(request=facts.request)
    try:
        _within_bounds(facts)
        return _identify(facts, get_runtime())
    except ProblemException as exc:
        return Verdict(refusal=exc, request=facts.request)


def settle(verdict: Verdict, status: int, actual_cost_micros: int | None = None) -> None:
    """After the view answered ``status``: refund a server error where a limit asks for it, else charge the
    actual cost the view reported (once), send the budget alerts of the spend then settled, and end the
    request's concurrency leases."""
    decision = verdict.decision
    if decision is None or not decision.allowed or verdict.client is None:
        return
    store = get_runtime().guard
    try:
        if status >= HTTPStatus.INTERNAL_SERVER_ERROR:
            store.refund(decision)
            actual: int | None = 0  # a failed view releases its estimate
        else:
            actual = actual_cost_micros
        if actual is not None and actual != decision.cost_micros:
            # The budgets' states take the settled spend, and keep only the thresholds it still reaches.
            store.reconcile(decision, actual)
        send_alerts(verdict)
    finally:
        if decision.request_id:  # whatever failed above, the request's leases end with it
            store.release(decision)


def send_alerts(verdict: Verdict) -> None:
    """Send the budget alerts ``verdict``'s decision holds and has not sent (each once).

    An admitted request's thresholds are sent when it is settled (:func:`settle`), with the spend it was
    finally charged: a refund or a lower actual cost takes back a threshold it no longer reaches. A refusal
    was charged nothing, so its alert (a budget that refused with 80 % or more spent reports 100 %) goes at
    once. A front door that never settles calls this itself (QuotaThrottle without QuotaHeadersMiddleware).
    """
    decision, client = verdict.decision, verdict.client
    if decision is None or client is None or not decision.unreported:
        return
    fire_budget_alerts(client.tag, client.subscription_id, decision.states, decision.now)
    for state in decision.states:
        state.alert = 0


def usage_field(plan_id: int | None, scope: str) -> str:
    """``"<plan>|<scope>"``: the usage counters a decision is counted under."""
    return f"{'-' if plan_id is None else plan_id}|{encode_part(scope) if scope else '-'}"


def _within_bounds(facts: Facts) -> None:
    """A weight or a cost estimate out of QUOTAS' bounds is a 400 naming them, whichever front door gave it:
    checked before any Redis call (a negative one would give units or money back; an enormous one would make
    the script fail, and the failure would look like Redis's)."""
    weight, cost = facts.weight, facts.cost_micros
    if weight is not None and not 0 <= weight <= quota_settings.MAX_REQUEST_WEIGHT:
        raise InvalidQuotaRequest(problems.out_of_bounds("weight", weight, quota_settings.MAX_REQUEST_WEIGHT))
    if cost is not None:
        _cost_within_bounds(cost)


def _cost_within_bounds(cost: int) -> int:
    """``cost`` (micro-units), or the 400 naming ``MAX_REQUEST_COST`` when it is out of bounds."""
    if not 0 <= cost <= to_micros(quota_settings.MAX_REQUEST_COST):
        raise InvalidQuotaRequest(problems.out_of_bounds("cost", from_micros(cost), quota_settings.MAX_REQUEST_COST))
    return cost


def _identify(facts: Facts, runtime: Runtime) -> Client:
    """The client ``facts``' request comes from (API key, user or address); its API key's use is noted."""
    client = identify(facts.http_request, facts.user, runtime.rules, facts.auth)
    if client.subscriber is not None:
        runtime.key_use.touch(client.subscriber.key_id)  # the poller writes it (quotas/runtime/key_use.py)
    return client


def _prepare(facts: Facts, started: float) -> Call | Verdict:
    """Steps 1 to 3: the store call, or the verdict of a request decided without it."""
    _within_bounds(facts)
    runtime = get_runtime()
    rules = runtime.rules.current()
    client = facts.client if facts.client is not None else _identify(facts, runtime)
    http = facts.http_request
    path, method = http.path, http.method or "GET"
    plan_id = client.subscriber.plan_id if client.subscriber is not None else rules.default_plan_id
    # One lookup in the snapshot's index: the plan's windows for this kind of request, and its price.
    matched = rules.for_request(plan_id, client.subscriber, facts.scope, path, method)
    if matched.by_country:  # a limit kept to some countries matched: the client's country decides
        matched = matched.in_country(request_country(http))
    windows = _plan_windows(facts, rules, client, plan_id, matched, path=path, method=method)
    windows += [w for rule in facts.limits for w in rule.windows]
    if not facts.priced:  # the request's budgets are the decision's that priced it
        windows = [w for w in windows if not w.is_budget]
    cost = _request_cost(facts, matched)
    usage = usage_field(plan_id, facts.scope) if facts.metered and facts.priced else ""
    call = Call(facts, runtime, rules, client, plan_id, windows, cost, usage, started)
    if rules.acl:
        entry = _match_acl(call)
        if entry is not None:
            return _listed(call, entry)
    if not windows:
        if rules.empty or not facts.metered or not facts.priced:
            return Verdict(client, plan_id, request=facts.request)
        # Nothing limits this request (e.g. an unlimited override), but usage still counts it.
        return _verdict(call, _count_unlimited(call))
    return call


def _request_cost(facts: Facts, matched: RequestRules) -> int:
    """What the request is charged before the view runs (micro-units): nothing on a decision after the one
    that priced it, else the view's estimate, else the limits' price."""
    if not facts.priced:
        return 0
    if facts.cost_micros is not None:
        return facts.cost_micros
    if facts.price_per_unit:
        # The limits' price for each unit of the weight: bounded as a view's own estimate is.
        return _cost_within_bounds(matched.price_micros * (1 if facts.weight is None else facts.weight))
    return matched.price_micros


def _plan_windows(
    facts: Facts,
    rules: RuleSet,
    client: Client,
    plan_id: int | None,
    matched: RequestRules,
    *,
    path: str,
    method: str,
) -> list[Window]:
    """The windows of ``client``'s plan that match the request (``matched``), else (no plan covers the client,
    or, with ``scope_limits_only``, the plan names no limit of the scope) those of the fallback limits."""
    if plan_id is not None and not facts.scope_limits_only:
        return list(matched.windows)
    if plan_id is not None:
        scoped = RequestRules.of(
            rule
            for rule in rules.limits_for(plan_id, client.subscriber)
            if rule.scope and rule.scope == facts.scope and rule.matches(facts.scope, path, method)
        )
        if scoped.by_country:
            scoped = scoped.in_country(request_country(facts.http_request))
        own = list(scoped.windows)
        if own:
            return own
    # No plan covers this client (no plans, or no subscription and no default plan), or none of its plan's
    # limits names the scope (scope_limits_only): the fallback applies.
    return [w for rule in facts.fallback if rule.matches(facts.scope, path, method) for w in rule.windows]


def _fail(call: Call) -> Decision | Verdict:
    """Redis unreachable: the failure mode's verdict, or this process's local decision."""
    mode = quota_settings.FAILURE_MODE
    if mode == "closed":
        return Verdict(call.client, call.plan_id, refusal=QuotaServiceUnavailable(problems.store_unavailable(), wait=1))
    if mode == "open":
        return Verdict(call.client, call.plan_id, request=call.facts.request)
    # "local": this process enforces its share of the same limits until Redis is back.
    return call.runtime.guard.decide_locally(
        call.tag, call.windows, call.weight, call.cost_micros, call.usage, multiplier=call.multiplier
    )


def _conclude(call: Call, decision: Decision | Verdict) -> Verdict:
    """Steps 5 and 6: audit, metrics, alerts and bans, then the refusal or the shaping delay."""
    if isinstance(decision, Verdict):
        return decision  # the failure mode answered
    for state in decision.would_deny():
        logger.info("quotas: shadow limit %r would have refused %s", state.window.policy, call.client.tag)
    if decision.ban_started:
        report_ban(call.client.tag, call.client.subscription_id, decision, call.plan)
    runtime = call.runtime
    facts = call.facts
    record_decision(
        facts.request, decision, client_tag=call.client.tag, plan=_slug(call.plan), scope=facts.scope,
        started=call.started, history=runtime.history if facts.metered else None, refusals=runtime.refusals,
        store_seconds=call.store_seconds,
    )  # fmt: skip
    verdict = _verdict(call, decision)
    if not decision.allowed:
        send_alerts(verdict)  # charged nothing: nothing to settle (an admission's alerts wait for settle())
    verdict.refusal = (
        _shape(runtime, decision, call.client.tag) if decision.allowed else refusal(call.rules, decision, call.plan_id)
    )
    return verdict


def refusal(rules: RuleSet, decision: Decision, plan_id: int | None) -> ProblemException:
    """The exception a refused ``decision`` is answered with: its problem body names the limit and
    the plan that would have served the request."""
    plan = rules.plans.get(plan_id) if plan_id is not None else None
    slug = plan.slug if plan is not None else None
    wait = decision.retry_after
    if decision.banned or decision.ban_started:
        return QuotaExceeded(problems.banned(decision, slug), wait=wait)
    if decision.reduced_only:
        # Refused only because limits are reduced under load: 503, as the draft asks.
        return ReducedCapacity(problems.reduced_capacity(decision), wait=wait)
    upgrade = rules.upgrade_for(plan_id, decision.denying_state().window) if decision.denying_states() else None
    if decision.budget_denied:
        if decision.denying_state().retry_us is None:  # more than the whole budget: no wait would help
            return QuotaExceeded(problems.request_exceeds_budget(decision, upgrade, slug))
        return QuotaExceeded(problems.budget_exceeded(decision, upgrade, slug), wait=wait)
    return QuotaExceeded(problems.rate_limited(decision, upgrade, slug), wait=wait)


def _shape(runtime: Runtime, decision: Decision, client_tag: str) -> QuotaExceeded | None:
    """Hold an admitted request a shaping leaky bucket delays, if this process has sleep to spare, and
    ``client_tag`` has some left of its share (quotas/runtime/shaping.py); else take it back and refuse it."""
    if decision.delay <= 0:
        return None
    wait = runtime.shaping.take(decision.delay, client_tag)
    if wait:
        runtime.guard.withdraw(decision)
        retry = shaping.retry_after(decision.delay, wait)
        return QuotaExceeded(problems.shaping_unavailable(retry), wait=retry)
    time.sleep(decision.delay)
    return None


def _listed(call: Call, entry: ACLRule) -> Verdict:
    """Allow entries skip limits and budgets; deny entries refuse with 403. Both are counted.

    An allowed request is counted with its estimated cost like any other, and
    its decision is reconciled after the view.
    """
    facts, runtime = call.facts, call.runtime
    allowed = entry.action == "allow"
    record_acl(
        facts.request, entry, client_tag=call.client.tag, plan=_slug(call.plan), scope=facts.scope,
        started=call.started, history=runtime.history if facts.metered else None, refusals=runtime.refusals,
    )  # fmt: skip
    if allowed:
        decision = runtime.guard.count_acl(call.client.tag, call.usage, True, facts.weight, call.cost_micros)
        return _verdict(call, decision) if decision is not None else Verdict(call.client, call.plan_id)
    runtime.guard.count_acl(call.client.tag, call.usage, False, None, 0)
    problem = problems.access_denied(entry, time.time())
    logger.info("quotas: deny-list entry %s refused %s", entry.id, call.client.tag)
    return Verdict(call.client, call.plan_id, refusal=AccessDenied(problem, wait=problem.get("retry_after")))


def _match_acl(call: Call) -> ACLRule | None:
    """The allow or deny entry for this request (an in-process lookup, no Redis)."""
    subscriber = call.client.subscriber
    user = call.facts.user
    return call.rules.acl.match(
        key_id=subscriber.key_id if subscriber else None,
        subscription_id=subscriber.id if subscriber else None,
        user_id=user.pk if user is not None and getattr(user, "is_authenticated", False) else None,
        ip=client_ip(call.facts.http_request),
        scope=call.facts.scope,
        now=time.time(),
    )


def _count_unlimited(call: Call) -> Decision:
    """Count an admitted request that no limit applies to (one script call, usage only)."""
    # Nothing is limited: no ban to check, no allowance to serve from, nothing to scale.
    call.multiplier, call.ban_policy, call.allowance_ok = 1.0, "", False
    try:
        return call.runtime.guard.decide_call(call)
    except StoreUnavailable:
        # Admitted whatever the failure mode (no limit applies); its usage waits in-process.
        return call.runtime.guard.decide_locally(call.tag, (), call.weight, call.cost_micros, call.usage)


def _verdict(call: Call, decision: Decision) -> Verdict:
    return Verdict(call.client, call.plan_id, decision, request=call.facts.request)


def _slug(plan: PlanRules | None) -> str | None:
    """A plan's slug (metrics, audit, history), None without a plan."""
    return plan.slug if plan is not None else None
