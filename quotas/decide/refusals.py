"""What a decision is answered with when the request may not go on: the refusal of a denied decision, and the
shaping delay of an admitted one this process cannot hold."""

from __future__ import annotations

from quotas import problems
from quotas.exceptions import ProblemException, QuotaExceeded, ReducedCapacity
from quotas.rules.snapshot import RuleSet
from quotas.runtime import Runtime, shaping
from quotas.store.decision import Decision


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


def shaped(runtime: Runtime, decision: Decision, client_tag: str) -> QuotaExceeded | None:
    """Hold an admitted request a shaping leaky bucket delays (``decision.delay`` seconds, more than 0), if this
    process has sleep to spare and ``client_tag`` has some left of its share (quotas/runtime/shaping.py); else
    take it back and refuse it."""
    wait = runtime.shaping.take(decision.delay, client_tag)
    if wait:
        runtime.guard.settlement.withdraw(decision)
        retry = shaping.retry_after(decision.delay, wait)
        return QuotaExceeded(problems.shaping_unavailable(retry), wait=retry)
    runtime.clock.sleep(decision.delay)
    return None
