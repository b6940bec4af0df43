"""The database rules backend: plans and limits as a quotas RuleSet."""

from __future__ import annotations

from typing import Any

from quotas.rates import parse_rates
from quotas.rules import UNLIMITED, LimitRule, PlanRules, RuleSet, Subscriber

from .models import APIKey, EndpointLimit, LimitOverride, Plan, Subscription


def limit_rule(limit: EndpointLimit) -> LimitRule:
    """The engine's view of one EndpointLimit."""
    return LimitRule(
        id=str(limit.pk),
        name=limit.name,
        rates=parse_rates(limit.rates),
        algorithm=limit.algorithm,
        scope=limit.scope,
        path_prefix=limit.path_prefix,
        methods=limit.method_set,
        burst=limit.burst,
        weight=limit.weight,
        max_delay=limit.max_delay,
        shadow=limit.shadow,
        refund_on_error=limit.refund_on_error,
    )


class PlansRulesBackend:
    """Loads every plan with its limits; resolves API keys and users on demand."""

    def load(self) -> RuleSet:
        plans = []
        default_id = None
        for plan in Plan.objects.prefetch_related("limits"):
            plans.append(
                PlanRules(
                    id=plan.pk,
                    slug=plan.slug,
                    name=plan.name,
                    price=plan.monthly_price,
                    priority=plan.priority,
                    limits=tuple(limit_rule(limit) for limit in plan.limits.all()),
                )
            )
            if plan.is_default:
                default_id = plan.pk
        return RuleSet(plans, default_id)

    def subscriber_for_key(self, key_hash: str) -> Subscriber | None:
        key = APIKey.objects.select_related("subscription").filter(key_hash=key_hash).first()
        if key is None:
            return None
        sub = key.subscription
        return _subscriber(sub, revoked=key.revoked_at is not None or not sub.is_active)

    def subscriber_for_user(self, user_id: Any) -> Subscriber | None:
        sub = Subscription.objects.filter(user_id=user_id, is_active=True).first()
        return _subscriber(sub) if sub is not None else None


def _subscriber(sub: Subscription, revoked: bool = False) -> Subscriber:
    overrides = tuple(
        sorted(
            (
                (str(o.limit_id), UNLIMITED if o.unlimited else parse_rates(o.rates))
                for o in LimitOverride.objects.filter(subscription=sub)
            ),
            key=lambda item: item[0],
        )
    )
    return Subscriber(id=sub.pk, plan_id=sub.plan_id, overrides=overrides, revoked=revoked)
