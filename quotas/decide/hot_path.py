"""The hot path of one decision, top to bottom: facts in, the store's call, the decision, the verdict out.

:func:`check` (and :func:`check_async`) resolve an adapter's :class:`~quotas.decide.shapes.Facts` against
the compiled rules into one :class:`Call`, which the guard and the store take as it is; the decision comes
back and becomes the :class:`~quotas.decide.shapes.Verdict`, its refusal made by :mod:`quotas.decide.refusals`.
Requests an allow or deny list decides, or no limit applies to, and the failure mode while Redis is away are
here too, beside the step they replace.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence

from asgiref.sync import sync_to_async

from quotas import problems
from quotas.contract.keys import encode_part
from quotas.decide.listed import listed, match_acl
from quotas.decide.refusals import refusal, shaped
from quotas.decide.settling import send_alerts
from quotas.decide.shapes import Facts, Verdict
from quotas.engine import Engine
from quotas.exceptions import (
    InvalidQuotaRequest,
    ProblemException,
    QuotaServiceUnavailable,
    StoreUnavailable,
)
from quotas.formats.money import from_micros, to_micros
from quotas.identity.addresses import client_ip
from quotas.identity.clients import Client, identify
from quotas.identity.countries import request_country
from quotas.observability.events import report_ban
from quotas.observability.record import record_decision
from quotas.rules.limits import Window
from quotas.rules.snapshot import PlanRules, RequestRules, RuleSet
from quotas.runtime import Runtime
from quotas.settings import quota_settings
from quotas.store.decision import DecideCall, Decision

logger = logging.getLogger("quotas.service")  # the service's log, where operators already look


class Call(Verdict, DecideCall):
    """One request's store call, resolved from its facts against the compiled rules, and the verdict it becomes:
    what the store is asked (it is a :class:`~quotas.store.decision.DecideCall`) with what the service needs
    around it, and then what the adapter is told (it is the :class:`~quotas.decide.shapes.Verdict`, whose
    ``decision``, ``to_settle`` and ``refusal`` :func:`_conclude` sets). A request keeps this one shape from the
    rules to the reply: one object where a call and a verdict were two (a class call costs about 2,000
    instructions, docs/benchmark-history.md)."""

    __slots__ = ("facts", "plan", "rules", "runtime", "started", "store_seconds")
    client: Client
    engine: Engine

    def __init__(  # noqa: PLR0913, PLR0917
        self,
        engine: Engine,
        facts: Facts,
        runtime: Runtime,
        rules: RuleSet,
        client: Client,
        plan_id: int | None,
        plan: PlanRules | None,
        windows: Sequence[Window],
        cost: int,
        usage: str,
        multiplier: float,
        started: float,
        leases: bool,
        allowance_ok: bool,
        allowance: tuple[int, float, int] | None,
    ) -> None:
        # Concurrency leases (``leases``: a window is a concurrency limit) are named by the request, so settling
        # can end them.
        request_id = uuid.uuid4().hex if leases else ""
        # Both __init__s called as functions, by keyword (a class call by keyword makes a dict of them first).
        Verdict.__init__(self, client=client, plan_id=plan_id, request=facts.request, engine=engine)
        DecideCall.__init__(
            self,
            tag=client.tag,
            windows=windows,
            weight=facts.weight,
            cost_micros=cost,
            usage=usage,
            multiplier=multiplier,
            ban_policy=plan.ban_policy if plan is not None and facts.metered else "",
            request_id=request_id,
            allowance_ok=allowance_ok,
            allowance=allowance,
        )
        self.facts = facts
        self.runtime = runtime
        self.rules = rules
        self.plan = plan
        self.started = started
        self.store_seconds = 0.0  # the store call's time (OpenTelemetry's span and histogram)


def check(engine: Engine, facts: Facts) -> Verdict:
    """The verdict ``engine`` gives one request (see the module docstring); a refusal is returned, never raised."""
    started = time.perf_counter()
    if not engine.settings.ENABLED:
        return Verdict(request=facts.request)
    try:
        call = _prepare(engine, facts, started)
        if not isinstance(call, Call):
            return call  # decided without the store
        sent = time.perf_counter()
        try:
            decision = call.runtime.guard.decide_call(call)
        except StoreUnavailable:
            return _conclude(call, _fail(call))
        call.store_seconds = time.perf_counter() - sent
        return _conclude(call, decision)
    except ProblemException as exc:  # a bad API key, a blocked address, rules the database cannot give
        return Verdict(refusal=exc, request=facts.request)


async def check_async(engine: Engine, facts: Facts) -> Verdict:
    """:func:`check` for an async view: the store call awaits redis-py's asyncio client.

    The steps around it may block (the rules snapshot and an API key may be read
    from the database, audit, budget alerts, a shaping delay): they run in
    asgiref's worker thread.
    """
    if not engine.settings.ENABLED:
        return Verdict(request=facts.request)
    try:
        call = await sync_to_async(_prepare)(engine, facts, time.perf_counter())
    except ProblemException as exc:
        return Verdict(refusal=exc, request=facts.request)
    if not isinstance(call, Call):
        return call
    sent = time.perf_counter()
    try:
        decision: Decision | Verdict = await call.runtime.guard.adecide(call)
        call.store_seconds = time.perf_counter() - sent
    except StoreUnavailable:
        decision = _fail(call)
    return await sync_to_async(_conclude)(call, decision)


def identified(engine: Engine, facts: Facts) -> Client | Verdict:
    """For an adapter that counts a request as another client (DRF's ``get_cache_key``, a decorator's
    ``key=``): the client the request is identified as (API key, user or address), which the adapter then
    sets as ``facts.client``; or the verdict of a request answered without a decision (limits off, a bad
    API key, a weight or cost out of bounds). It may read the database (an API key): sync code only."""
    if not engine.settings.ENABLED:
        return Verdict(request=facts.request)
    try:
        _within_bounds(facts.weight, facts.cost_micros)
        runtime = engine.runtime()
        client = identify(facts.http_request, facts.user, runtime.rules, facts.auth)
    except ProblemException as exc:
        return Verdict(refusal=exc, request=facts.request)
    if client.subscriber is not None:
        runtime.key_use.touch(client.subscriber.key_id, facts.http_request, client_ip)  # see quotas/runtime/key_use.py
    return client


# One function read top to bottom: the steps it takes were one-use helpers, each a call on every request.
def _prepare(engine: Engine, facts: Facts, started: float) -> Call | Verdict:  # noqa: C901, PLR0912, PLR0915
    """Steps 1 to 3: the store call, or the verdict of a request decided without it."""
    weight, estimate = facts.weight, facts.cost_micros
    if weight is not None or estimate is not None:
        _within_bounds(weight, estimate)
    runtime = engine.ready or engine.runtime()  # see Engine.ready: a call less
    rules = runtime.rules.fresh or runtime.rules.current()  # see fresh: a call less
    http = facts.http_request
    client = facts.client
    if client is None:
        client = identify(http, facts.user, runtime.rules, facts.auth)
        if client.subscriber is not None:
            runtime.key_use.touch(client.subscriber.key_id, http, client_ip)  # see quotas/runtime/key_use.py
    path, method, scope = http.path, http.method or "GET", facts.scope
    subscriber = client.subscriber
    plan_id = subscriber.plan_id if subscriber is not None else rules.default_plan_id
    # One lookup in the snapshot's index: the plan's windows for this kind of request, and its price (read from
    # its routes without a call where the path changes nothing: see RuleSet.routes).
    matched = rules.routes.get((plan_id, subscriber.rules_key if subscriber else None, scope, method))
    if matched is None:
        matched = rules.for_request(plan_id, subscriber, scope, path, method)
    if matched.by_country:  # a limit kept to some countries matched: the client's country decides
        matched = matched.in_country(request_country(http))
    windows: Sequence[Window]
    if plan_id is not None and not facts.scope_limits_only:
        # The route's own tuple, as the snapshot keeps it (whether one leases, known with it): nothing copied.
        windows, leases = matched.windows, matched.leases
    else:
        windows = _fallback_windows(facts, rules, client, plan_id, path=path, method=method)
        leases = any(w.algorithm == "concurrency" for w in windows)
    if facts.limits:
        extra = [w for rule in facts.limits for w in rule.windows]
        windows = [*windows, *extra]
        leases = leases or any(w.algorithm == "concurrency" for w in extra)
    # What the request is charged before the view runs (micro-units): nothing on a decision after the one that
    # priced it (whose budgets those are too), else the view's estimate, else the limits' price.
    if not facts.priced:
        windows = [w for w in windows if not w.is_budget]
        cost = 0
    elif estimate is not None:
        cost = estimate
    elif facts.price_per_unit:
        # The limits' price for each unit of the weight: bounded as a view's own estimate is.
        cost = _cost_within_bounds(matched.price_micros * (1 if weight is None else weight))
    else:
        cost = matched.price_micros
    # The usage counters a decision is counted under: "<plan>|<scope>".
    metered = facts.metered and facts.priced
    usage = (engine.usage_fields.get((plan_id, scope)) or _usage_field(engine, plan_id, scope)) if metered else ""
    plan = rules.plans.get(plan_id) if plan_id is not None else None
    # The plan's adaptive multiplier, read as Multipliers.get reads it: a call less on every request.
    multiplier = runtime.multipliers.by_plan.get(plan_id, 1.0)
    # An allowance charges each request the limits' price; a view's own estimate varies per request.
    allowance_ok = estimate is None and (plan is None or plan.local_allowances)
    wanted = None
    allowances = runtime.guard.allowances
    if allowance_ok and allowances is not None and windows and not rules.acl.rules:
        # The client's allowance asked before the call is built (else the guard asks it): a request it serves
        # builds no Call: 4,900 to 5,800 instructions less a busy request (docs/benchmark-history.md).
        served, wanted = allowances.ask(client.tag, windows, weight, cost, usage, multiplier)
        if served is not None:
            return _served(engine, facts, runtime, client, plan_id, plan, served, started)
        allowance_ok = False  # asked: the guard asks no more (wanted is the allowance the call asks Redis for)
    call = Call(
        engine, facts, runtime, rules, client, plan_id, plan, windows, cost, usage, multiplier, started, leases,
        allowance_ok, wanted,
    )  # fmt: skip
    if rules.acl.rules:
        entry = match_acl(call)
        if entry is not None:
            return listed(call, entry)
    if not windows:
        if rules.empty or not metered:
            return Verdict(client=client, plan_id=plan_id, request=facts.request)
        # Nothing limits this request (e.g. an unlimited override), but usage still counts it.
        # No window: no lease to end, no budget alert (to_settle False: settled only if the view fails or reports
        # an actual cost).
        return Verdict(
            client=client,
            plan_id=plan_id,
            decision=_count_unlimited(call),
            request=facts.request,
            to_settle=False,
            engine=engine,
        )
    return call


def _served(  # noqa: PLR0917
    engine: Engine,
    facts: Facts,
    runtime: Runtime,
    client: Client,
    plan_id: int | None,
    plan: PlanRules | None,
    decision: Decision,
    started: float,
) -> Verdict:
    """The verdict of a request its client's allowance admitted (:meth:`Allowances.ask`), counted as
    :func:`_conclude` counts a decision: a served decision has no shadow window, delay, ban, lease or alert of
    its own (see :class:`~quotas.store.served.ServedDecision`), so it is settled only for a subscription with
    alert thresholds of its own (or when the view fails or reports an actual cost)."""
    record_decision(
        facts.request, decision, client_tag=client.tag, plan=plan.slug if plan is not None else None,
        scope=facts.scope, started=started, history=runtime.history if facts.metered else None,
        refusals=runtime.refusals, shadow_denied=False,
    )  # fmt: skip
    subscriber = client.subscriber
    # __init__ called by keyword as a function: a class call packs keywords in a dict (docs/benchmark-history.md).
    verdict = Verdict.__new__(Verdict)
    Verdict.__init__(
        verdict,
        client=client,
        plan_id=plan_id,
        decision=decision,
        request=facts.request,
        to_settle=subscriber is not None and subscriber.alerts != (),
        engine=engine,
    )
    return verdict


def _usage_field(engine: Engine, plan_id: int | None, scope: str) -> str:
    # Kept on the engine (Engine.usage_fields) rather than encoded and formatted on every request.
    part = encode_part(scope) if scope else "-"
    usage = engine.usage_fields[plan_id, scope] = f"{plan_id}|{part}" if plan_id is not None else f"-|{part}"
    return usage


def _fallback_windows(
    facts: Facts, rules: RuleSet, client: Client, plan_id: int | None, *, path: str, method: str
) -> list[Window]:
    """The windows of a request no plan covers (no plans, or no subscription and no default plan): the
    fallback limits'. With ``scope_limits_only``, those of the plan's limits that name the scope, if any."""
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
    return [w for rule in facts.fallback if rule.matches(facts.scope, path, method) for w in rule.windows]


def _conclude(call: Call, decision: Decision | Verdict) -> Verdict:
    """Steps 5 and 6: audit, metrics, alerts and bans, then the refusal or the shaping delay."""
    if isinstance(decision, Verdict):
        return decision  # the failure mode answered
    client, facts, runtime = call.client, call.facts, call.runtime
    # Decision.would_deny(), .delay and .unreported in one pass, which a decision from the store's reply or an
    # allowance makes without making its states.
    delay_us, alerting, would_deny = decision.notes()
    for state in would_deny:
        logger.info("quotas: shadow limit %r would have refused %s", state.window.policy, client.tag)
    if decision.ban_started:
        report_ban(client.tag, client.subscription_id, decision, call.plan)
    record_decision(
        facts.request, decision, client_tag=client.tag, plan=call.plan.slug if call.plan is not None else None,
        scope=facts.scope, started=call.started, history=runtime.history if facts.metered else None,
        refusals=runtime.refusals, store_seconds=call.store_seconds, shadow_denied=bool(would_deny),
    )  # fmt: skip
    # Nothing to settle after a plain answer (most requests): no lease to end, no alert waiting for the settled
    # spend; a refusal is charged nothing. The front doors then skip settling (quotas.http.middleware.after_view).
    # A subscription with alert thresholds of its own settles every admission: what its spend crossed is
    # judged with the spend as settled (quotas.decide.settling).
    subscriber = client.subscriber
    to_settle = decision.allowed and (
        alerting or bool(decision.request_id) or (subscriber is not None and subscriber.alerts != ())
    )
    call.decision, call.to_settle = decision, to_settle  # the call is now its verdict
    if not decision.allowed:
        send_alerts(call)  # charged nothing: nothing to settle (an admission's alerts wait for settle())
        call.refusal = refusal(call.rules, decision, call.plan_id)
    elif delay_us > 0:
        call.refusal = shaped(runtime, decision, client.tag)
    return call


def _fail(call: Call) -> Decision | Verdict:
    """Redis unreachable: the failure mode's verdict, or this process's local decision."""
    mode = call.engine.settings.FAILURE_MODE
    if mode == "closed":
        refused = QuotaServiceUnavailable(problems.store_unavailable(), wait=1)
        return Verdict(client=call.client, plan_id=call.plan_id, refusal=refused)
    if mode == "open":
        return Verdict(client=call.client, plan_id=call.plan_id, request=call.facts.request)
    # "local": this process enforces its share of the same limits until Redis is back.
    return call.runtime.guard.decide_locally(
        call.tag, call.windows, call.weight, call.cost_micros, call.usage, multiplier=call.multiplier
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


def _within_bounds(weight: int | None, cost: int | None) -> None:
    """A weight or a cost estimate out of QUOTAS' bounds is a 400 naming them, whichever front door gave it:
    checked before any Redis call (a negative one would give units or money back; an enormous one would make
    the script fail, and the failure would look like Redis's)."""
    if weight is not None and not 0 <= weight <= quota_settings.MAX_REQUEST_WEIGHT:
        raise InvalidQuotaRequest(problems.out_of_bounds("weight", weight, quota_settings.MAX_REQUEST_WEIGHT))
    if cost is not None:
        _cost_within_bounds(cost)


def _cost_within_bounds(cost: int) -> int:
    """``cost`` (micro-units), or the 400 naming ``MAX_REQUEST_COST`` when it is out of bounds."""
    if not 0 <= cost <= to_micros(quota_settings.MAX_REQUEST_COST):
        raise InvalidQuotaRequest(problems.out_of_bounds("cost", from_micros(cost), quota_settings.MAX_REQUEST_COST))
    return cost
