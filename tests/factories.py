"""Model factories (factory_boy)."""

from __future__ import annotations

from decimal import Decimal

import factory
from django.contrib.auth import get_user_model

from plans.models import APIKey, EndpointLimit, Plan, Subscription
from quotas.formats.money import to_micros
from quotas.formats.rates import Rate, parse_rates
from quotas.rules.limits import LimitRule
from quotas.rules.snapshot import PlanRules


class PlanFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Plan
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"plan{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    monthly_price = 0
    priority = 0


class EndpointLimitFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = EndpointLimit

    plan = factory.SubFactory(PlanFactory)
    name = factory.Sequence(lambda n: f"limit{n}")
    rates = "10/min"
    algorithm = "fixed_window"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-1")


class SubscriptionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Subscription

    name = factory.Sequence(lambda n: f"Customer {n}")
    plan = factory.SubFactory(PlanFactory)


def issue_key(subscription: Subscription | None = None, **kwargs: object) -> str:
    """A raw API key for ``subscription`` (a new one on a new plan by default)."""
    subscription = subscription or SubscriptionFactory(**kwargs)
    return APIKey.issue(subscription)[1]


def plan_rules(
    plan_id: int, price: str, rates: str = "", scoped: dict[str, str] | None = None, budget_per_day: str | None = None
) -> PlanRules:
    """A compiled plan (no database): ``rates`` on every request (e.g. "10/s; 1000/day"), ``scoped`` limits by
    scope, and a daily budget in USD."""
    limits = [LimitRule(id=f"g{plan_id}", name="global", rates=parse_rates(rates))] if rates else []
    for scope, text in (scoped or {}).items():
        limits.append(LimitRule(id=f"{scope}{plan_id}", name=scope, rates=parse_rates(text), scope=scope))
    if budget_per_day is not None:
        daily = (Rate(to_micros(budget_per_day), 86_400),)
        limits.append(LimitRule(f"b{plan_id}", "daily", daily, algorithm="budget", period="day", currency="USD"))
    return PlanRules(plan_id, f"plan{plan_id}", f"Plan {plan_id}", Decimal(price), plan_id, tuple(limits))
