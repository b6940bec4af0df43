"""Fixtures for the usage tests: plans whose limits refuse early, and traffic sent through the real throttle."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from plans.models import Plan
from quotas.engine import default_engine
from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory


@pytest.fixture
def free(db) -> Plan:
    """The default plan: 5 requests a minute overall, 2 a minute on the search scope."""
    plan = PlanFactory(slug="free", monthly_price=Decimal("0"), is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="5/min", algorithm="fixed_window")
    EndpointLimitFactory(plan=plan, name="search", scope="search", rates="2/min", algorithm="fixed_window")
    return plan


@pytest.fixture
def pro(db) -> Plan:
    """A bigger plan: 1000 requests a minute."""
    plan = PlanFactory(slug="pro", monthly_price=Decimal("49"), priority=5)
    EndpointLimitFactory(plan=plan, name="global", rates="1000/min", algorithm="fixed_window")
    return plan


@pytest.fixture
def api() -> APIClient:
    return APIClient(raise_request_exception=False)


@pytest.fixture
def staff(api):
    """An operator signed in to ``api``: staff with the view_all_usage permission."""
    user = UserFactory(username="ops", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_all_usage"))
    api.force_authenticate(user)
    return user


def send(api: APIClient, key: str | None, n: int, path: str = "/api/demo/ping") -> Counter:
    """Send ``n`` GETs with API key ``key`` (None: anonymous); returns the count of each status code."""
    extra = {"HTTP_X_API_KEY": key} if key is not None else {}
    codes = Counter(api.get(path, **extra).status_code for _ in range(n))
    # What the poller thread does every second in a server: the requests served from allowances and the
    # engine's batched counts go into Redis (its other writes are left to the tests that tick).
    default_engine.runtime().settle_allowances()
    default_engine.runtime().guard.usage.flush_usage()
    return codes


def assert_refusals_counted(counted: dict[str, int], sent: dict[str, int]) -> None:
    """Every client's refusals were counted exactly (client -> count), including those the engine
    answered from its in-process memory (counted in batches, flushed by the sender)."""
    wrong = {c: (counted.get(c, 0), n) for c, n in sent.items() if counted.get(c, 0) != n}
    assert not wrong, f"refusals counted differ from those sent (counted, sent): {wrong}"
