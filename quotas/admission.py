"""Admission: what the quota layer decides about one request, apart from any web framework.

An adapter (the DRF throttle, :mod:`quotas.drf.throttling`) identifies the
client and gathers the windows that apply into an :class:`Ask`;
:func:`admit` then runs the policy in order:

1. allow and deny lists (in process, no Redis);
2. every window in one engine call (:meth:`quotas.engine.core.Engine.decide`);
3. the failure mode when Redis is unreachable (``QUOTAS['FAILURE_MODE']``);
4. audit and metrics, budget alerts, ban reports;
5. a shaping leaky bucket's delay.

It returns an :class:`Admission`: the decision the middleware settles after
the view, and the refusal (a :class:`~quotas.exceptions.ProblemException`
carrying its problem+json body) the adapter raises. :func:`admit_async` is
the same policy for async views (:mod:`quotas.django`), the engine call
awaited from redis-py's asyncio client (:mod:`quotas.engine.aio`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest

from quotas.conf import quota_settings
from quotas.engine import aio, shaping
from quotas.engine.core import Engine
from quotas.engine.decision import Decision
from quotas.engine.keys import encode_part
from quotas.exceptions import (
    AccessDenied,
    ProblemException,
    QuotaExceeded,
    QuotaServiceUnavailable,
    ReducedCapacity,
    StoreUnavailable,
)
from quotas.http import problems
from quotas.http.context import Decided
from quotas.identity.clients import Client, client_ip
from quotas.observability.events import fire_budget_alerts, report_ban
from quotas.observability.record import record_acl, record_decision
from quotas.rules.acl import ACLRule
from quotas.rules.snapshot import RuleSet, Window

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ask:
    """One request, as the quota layer needs it.

    ``windows`` are every window that applies (from the plan, or DRF's rates);
    ``weight`` overrides each window's own weight when not None;
    ``cost_micros`` is the view's estimate, or None for the limits' prices.
    ``request`` is the framework's request: where the view reports its actual
    cost, and what the audit log describes.
    """

    client: Client
    plan_id: int | None
    windows: Sequence[Window]
    scope: str
    http_request: HttpRequest
    request: Any
    user_id: Any = None
    weight: int | None = None
    cost_micros: int | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """The outcome of :func:`admit`: what to settle after the view, and the refusal to raise, if any."""

    decided: Decided | None = None
    refusal: ProblemException | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    """What :func:`prepare` worked out for the engine call of an ask."""

    started: float
    usage: str
    cost: int
    multiplier: float
    ban_policy: str
    request_id: str
    plan_slug: str | None

    def decide_options(self) -> dict[str, Any]:
        """The keyword arguments of the engine's decide call (sync or async) for this ask."""
        return {
            "cost_micros": self.cost,
            "usage": self.usage,
            "multiplier": self.multiplier,
            "ban_policy": self.ban_policy,
            "request_id": self.request_id,
        }


def admit(engine: Engine, rules: RuleSet, ask: Ask) -> Admission:
    """Decide ``ask`` (see the module docstring); never raises for a refusal, returns it."""
    prepared = prepare(engine, rules, ask)
    if isinstance(prepared, Admission):
        return prepared
    try:
        decision = engine.decide(ask.client.tag, ask.windows, ask.weight, **prepared.decide_options())
    except StoreUnavailable:
        return conclude(engine, rules, ask, prepared, fail(engine, ask, prepared))
    return conclude(engine, rules, ask, prepared, decision)


async def admit_async(engine: Engine, rules: RuleSet, ask: Ask) -> Admission:
    """:func:`admit` for an async view: the engine call awaits redis-py's asyncio client.

    The steps around it may block (allow-list counting, audit, budget alerts,
    a shaping delay): they run in asgiref's worker thread.
    """
    prepared = await sync_to_async(prepare)(engine, rules, ask)
    if isinstance(prepared, Admission):
        return prepared
    try:
        decision: Decision | Admission = await aio.decide(
            engine, ask.client.tag, ask.windows, ask.weight, **prepared.decide_options()
        )
    except StoreUnavailable:
        decision = fail(engine, ask, prepared)
    return await sync_to_async(conclude)(engine, rules, ask, prepared, decision)


def prepare(engine: Engine, rules: RuleSet, ask: Ask) -> Prepared | Admission:
    """Steps 1 and the start of 2: the admission of a listed or unlimited request, else the engine call's inputs."""
    started = time.perf_counter()
    plan = rules.plans.get(ask.plan_id) if ask.plan_id is not None else None
    slug = plan.slug if plan is not None else None
    usage = usage_field(ask.plan_id, ask.scope)
    if rules.acl:
        entry = _match_acl(rules, ask)
        if entry is not None:
            allowed = entry.action == "allow"
            record_acl(
                ask.request,
                allowed,
                ask.client.tag,
                slug,
                ask.scope,
                entry.id,
                started,
                engine.history,
                engine.refusals,
            )
            return _listed(engine, rules, ask, entry, usage)
    if not ask.windows:
        if rules.empty:
            return Admission()
        # Nothing limits this request (e.g. an unlimited override), but usage still counts it.
        return Admission(_decided(ask, _count_unlimited(engine, ask, usage, _cost(rules, ask))))
    multiplier = engine.rules.multipliers.get(ask.plan_id, 1.0) if ask.plan_id is not None else 1.0
    # Concurrency leases are named by the request, so the middleware can end them.
    request_id = uuid.uuid4().hex if any(w.algorithm == "concurrency" for w in ask.windows) else ""
    ban_policy = plan.ban_policy if plan is not None else ""
    return Prepared(started, usage, _cost(rules, ask), multiplier, ban_policy, request_id, slug)


def fail(engine: Engine, ask: Ask, prepared: Prepared) -> Decision | Admission:
    """Step 3, Redis unreachable: the failure mode's admission, or this process's local decision."""
    mode = quota_settings.FAILURE_MODE
    if mode == "closed":
        return Admission(refusal=QuotaServiceUnavailable(problems.store_unavailable(), wait=1))
    if mode == "open":
        return Admission()
    # "local": this process enforces its share of the same limits until Redis is back.
    return engine.decide_locally(
        ask.client.tag, ask.windows, ask.weight, prepared.cost, prepared.usage, prepared.multiplier
    )


def conclude(engine: Engine, rules: RuleSet, ask: Ask, prepared: Prepared, decision: Decision | Admission) -> Admission:
    """Steps 4 and 5 for ``decision``: audit, metrics, alerts and bans, then the refusal or the shaping delay."""
    if isinstance(decision, Admission):
        return decision  # the failure mode answered
    decided = _decided(ask, decision)
    for state in decision.would_deny():
        logger.info("quotas: shadow limit %r would have refused %s", state.window.policy, ask.client.tag)
    fire_budget_alerts(ask.client, decision.states)
    if decision.ban_started:
        report_ban(ask.client, decision, rules.plans.get(ask.plan_id) if ask.plan_id is not None else None)
    record_decision(
        ask.request,
        decision,
        ask.client.tag,
        prepared.plan_slug,
        ask.scope,
        prepared.started,
        engine.history,
        engine.refusals,
    )
    if decision.allowed:
        return Admission(decided, _shape(engine, decision))
    return Admission(decided, refusal(rules, decision, ask.plan_id))


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
        return QuotaExceeded(problems.budget_exceeded(decision, upgrade, slug), wait=wait)
    return QuotaExceeded(problems.rate_limited(decision, upgrade, slug), wait=wait)


def usage_field(plan_id: int | None, scope: str) -> str:
    """``"<plan>|<scope>"``: the usage counters a decision is counted under."""
    return f"{'-' if plan_id is None else plan_id}|{encode_part(scope) if scope else '-'}"


def _shape(engine: Engine, decision: Decision) -> QuotaExceeded | None:
    """Hold an admitted request a shaping leaky bucket delays, if this process has sleep to spare
    (quotas/engine/shaping.py); else take it back and refuse it."""
    if decision.delay <= 0:
        return None
    wait = shaping.budget.take(decision.delay)
    if wait:
        engine.withdraw(decision)
        retry = shaping.retry_after(decision.delay, wait)
        return QuotaExceeded(problems.shaping_unavailable(retry), wait=retry)
    time.sleep(decision.delay)
    return None


def _listed(engine: Engine, rules: RuleSet, ask: Ask, entry: ACLRule, usage: str) -> Admission:
    """Allow entries skip limits and budgets; deny entries refuse with 403. Both are counted.

    An allowed request is counted with its estimated cost like any other, and
    its decision is reconciled after the view.
    """
    if entry.action == "allow":
        decision = engine.count_acl(ask.client.tag, usage, True, ask.weight, _cost(rules, ask))
        return Admission(_decided(ask, decision) if decision is not None else None)
    engine.count_acl(ask.client.tag, usage, False, None, 0)
    problem = problems.access_denied(entry, time.time())
    logger.info("quotas: deny-list entry %s refused %s", entry.id, ask.client.tag)
    return Admission(refusal=AccessDenied(problem, wait=problem.get("retry_after")))


def _match_acl(rules: RuleSet, ask: Ask) -> ACLRule | None:
    """The allow or deny entry for this request (an in-process lookup, no Redis)."""
    subscriber = ask.client.subscriber
    return rules.acl.match(
        key_id=subscriber.key_id if subscriber else None,
        subscription_id=subscriber.id if subscriber else None,
        user_id=ask.user_id,
        ip=client_ip(ask.http_request),
        scope=ask.scope,
        now=time.time(),
    )


def _count_unlimited(engine: Engine, ask: Ask, usage: str, cost: int) -> Decision:
    """Count an admitted request that no limit applies to (one script call, usage only)."""
    try:
        return engine.decide(ask.client.tag, (), ask.weight, cost_micros=cost, usage=usage)
    except StoreUnavailable:
        # Admitted whatever the failure mode (no limit applies); its usage waits in-process.
        return engine.decide_locally(ask.client.tag, (), ask.weight, cost, usage)


def _cost(rules: RuleSet, ask: Ask) -> int:
    """The estimated cost in micro-units: the view's, else the prices of the limits the request matches."""
    if ask.cost_micros is not None:
        return ask.cost_micros
    http = ask.http_request
    return rules.price_micros(ask.plan_id, ask.client.subscriber, ask.scope, http.path, http.method or "GET")


def _decided(ask: Ask, decision: Decision) -> Decided:
    return Decided(decision, ask.client, ask.plan_id, ask.request)
