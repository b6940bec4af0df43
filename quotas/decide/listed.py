"""Requests an allow or deny list decides (:attr:`RuleSet.acl <quotas.rules.snapshot.RuleSet>`): found before the
limits are asked, counted, and answered without them. ``call`` is the request's
:class:`~quotas.decide.hot_path.Call` (its client, facts, rules and runtime), which :func:`quotas.decide.check`
hands here only when the rules have such a list."""

from __future__ import annotations

import logging
from typing import Any

from quotas import problems
from quotas.decide.shapes import Verdict
from quotas.exceptions import AccessDenied
from quotas.formats.acl import ACLRule
from quotas.identity.addresses import client_ip
from quotas.observability.record import record_acl

logger = logging.getLogger("quotas.service")  # the service's log (quotas.decide.hot_path's)


def listed(call: Any, entry: ACLRule) -> Verdict:
    """Allow entries skip limits and budgets; deny entries refuse with 403. Both are counted.

    An allowed request is counted with its estimated cost like any other, and
    its decision is reconciled after the view.
    """
    facts, runtime = call.facts, call.runtime
    allowed = entry.action == "allow"
    record_acl(
        facts.request, entry, client_tag=call.client.tag, plan=call.plan.slug if call.plan is not None else None,
        scope=facts.scope, started=call.started, history=runtime.history if facts.metered else None,
        refusals=runtime.refusals,
    )  # fmt: skip
    if allowed:
        decision = runtime.guard.count_acl(call.client.tag, call.usage, True, facts.weight, call.cost_micros)
        if decision is None:
            return Verdict(client=call.client, plan_id=call.plan_id)
        # No window: nothing to settle unless the view fails or reports an actual cost.
        return Verdict(
            client=call.client,
            plan_id=call.plan_id,
            decision=decision,
            request=facts.request,
            to_settle=False,
            engine=call.engine,
        )
    runtime.guard.count_acl(call.client.tag, call.usage, False, None, 0)
    problem = problems.access_denied(entry, runtime.clock.now())
    logger.info("quotas: deny-list entry %s refused %s", entry.id, call.client.tag)
    refused = AccessDenied(problem, wait=problem.get("retry_after"))
    return Verdict(client=call.client, plan_id=call.plan_id, refusal=refused)


def match_acl(call: Any) -> ACLRule | None:
    """The allow or deny entry for this request (an in-process lookup, no Redis)."""
    subscriber = call.client.subscriber
    user = call.facts.user
    return call.rules.acl.match(
        key_id=subscriber.key_id if subscriber else None,
        subscription_id=subscriber.id if subscriber else None,
        user_id=user.pk if user is not None and getattr(user, "is_authenticated", False) else None,
        ip=client_ip(call.facts.http_request),
        scope=call.facts.scope,
        now=call.runtime.clock.now(),
    )
