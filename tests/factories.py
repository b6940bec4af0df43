"""Model factories (factory_boy)."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from plans.models import APIKey, EndpointLimit, Plan, Subscription


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
