"""Fixtures for the usage tests: plans whose limits refuse early, and traffic sent through the real throttle."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from plans.models import Plan
from tests.factories import EndpointLimitFactory, PlanFactory


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


def send(api: APIClient, key: str | None, n: int, path: str = "/api/demo/ping") -> Counter:
    """Send ``n`` GETs with API key ``key`` (None: anonymous); returns the count of each status code."""
    extra = {"HTTP_X_API_KEY": key} if key is not None else {}
    return Counter(api.get(path, **extra).status_code for _ in range(n))


def assert_refusals_counted(counted: dict[str, int], sent: dict[str, int]) -> None:
    """Every client's refusals were counted exactly (client -> count); call it last in a test.

    Known gap (quotas/): a client refused recently is refused again from the
    engine's in-process memory (``quotas.engine.DenyMemory``) without running
    the decision script, so those refusals bump no usage counter. Until the
    engine counts them, an undercount here is an expected failure; an
    overcount is always a failure.
    """
    over = {c: (counted.get(c, 0), n) for c, n in sent.items() if counted.get(c, 0) > n}
    assert not over, f"more refusals counted than sent (counted, sent): {over}"
    under = {c: (counted.get(c, 0), n) for c, n in sent.items() if counted.get(c, 0) < n}
    if under:
        pytest.xfail(f"refusals answered from DenyMemory are not counted (counted, sent): {under}")
