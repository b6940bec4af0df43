"""Subscriptions with an owner, a member and a stranger (an owner of another subscription), and API clients
signed in as each; every test runs on the memory store. The notifications' real local webhook receiver and its
settings (``receiver``, ``internal_allowed``, ``matches_schema``) are shared from tests/notifications."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from console.models import Membership, Role
from plans.models import Subscription
from tests.dashboard.conftest import chromium  # noqa: F401  (the browser tests' Chromium)
from tests.factories import PlanFactory, SubscriptionFactory, UserFactory, issue_key
from tests.notifications.conftest import internal_allowed, matches_schema, receiver  # noqa: F401  (fixtures)


@dataclass
class Team:
    """One subscription and the people around it."""

    subscription: Subscription
    owner: Any
    member: Any
    key: str

    def url(self, tail: str = "") -> str:
        return f"/api/v1/subscriptions/{self.subscription.pk}/{tail}".rstrip("/")


def signed_in(user: Any, csrf: bool = False) -> APIClient:
    """A client signed in as ``user`` with a session (``csrf``: checked, as a browser's is)."""
    client = APIClient(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def team(db) -> Team:
    owner = UserFactory(username="olivia")
    subscription = SubscriptionFactory(name="Acme", user=owner, plan=PlanFactory(slug="pro"))
    member = UserFactory(username="max")
    Membership.objects.create(subscription=subscription, user=member, role=Role.MEMBER)
    return Team(subscription, owner, member, issue_key(subscription))


@pytest.fixture
def other_team(db) -> Team:
    owner = UserFactory(username="stan")
    subscription = SubscriptionFactory(name="Globex", user=owner, plan=PlanFactory(slug="free"))
    member = UserFactory(username="mia")
    Membership.objects.create(subscription=subscription, user=member, role=Role.MEMBER)
    return Team(subscription, owner, member, issue_key(subscription))


@pytest.fixture
def owner_api(team: Team) -> APIClient:
    return signed_in(team.owner)


@pytest.fixture
def member_api(team: Team) -> APIClient:
    return signed_in(team.member)


@pytest.fixture
def key_api(team: Team) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=team.key)
    return client


@pytest.fixture
def stranger_api(other_team: Team) -> APIClient:
    return signed_in(other_team.owner)
