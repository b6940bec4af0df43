"""``QUOTAS['ADAPTIVE']['MODE']``: a new project observes (the controller computes and shows its multipliers, the
engine keeps every limit), and acts only once an operator sets ``'enforce'``.

Through what a team meets: the demo API's RateLimit headers, the staff dashboard's data feed and ``/metrics``.
"""

from __future__ import annotations

import time

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from adaptive.conf import adaptive_settings
from adaptive.controller import read_state, run_controller
from adaptive.publish import read_multipliers
from adaptive.reporter import publish_sample
from quotas.engine import default_engine
from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory, issue_key
from tests.store_client import board_of

pytestmark = [pytest.mark.django_db, pytest.mark.urls("config.urls")]


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", name="Free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="10/min", algorithm="fixed_window")
    return plan


@pytest.fixture
def staff(db) -> Client:
    client = Client()
    client.force_login(UserFactory(username="operator", is_staff=True, is_superuser=True))
    return client


def overload(redis_client) -> None:
    """The whole machine's CPU over the critical mark, reported as a web process does, then one controller run."""
    sample = {"host": "web1", "pid": 1, "at": time.time(), "cpu": 0.97, "memory": 0.4, "db": None, "redis_ms": 0.2}
    publish_sample(board_of(redis_client), sample, 5.0)
    run_controller(board_of(redis_client))
    runtime = default_engine.runtime()
    runtime.rules.current()
    runtime.multipliers.refresh(runtime.store.multipliers)  # this process reads the published multipliers at once


def limit_seen(plan) -> str:
    return APIClient().get("/api/demo/ping", HTTP_X_API_KEY=issue_key(plan=plan))["X-RateLimit-Limit"]


def gauge(staff: Client, name: str, plan: str) -> float | None:
    body = staff.get("/metrics").content.decode()
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("plan") == plan:
                return sample.value
    return None


def test_a_new_project_observes_and_shows_what_it_would_do(free, staff, redis_client) -> None:
    """Default settings: under overload the free plan keeps its 10/min, while the controller's state, the
    dashboard and /metrics show the multiplier it would apply."""
    assert adaptive_settings.MODE == "observe"
    overload(redis_client)
    assert read_multipliers(board_of(redis_client)) == {free.pk: 1.0}
    assert limit_seen(free) == "10"
    computed = read_state(board_of(redis_client))["multipliers"][str(free.pk)]
    assert computed < 1.0
    adaptive = staff.get("/dashboard/data.json").json()["adaptive"]
    assert adaptive["mode"] == "observe"
    assert adaptive["plans"] == [{"id": free.pk, "name": "Free", "multiplier": 1.0, "computed": computed}]
    assert gauge(staff, "quota_adaptive_multiplier", "free") == 1.0
    assert gauge(staff, "quota_adaptive_computed_multiplier", "free") == computed


@pytest.mark.usefixtures("enforce")
def test_enforce_applies_the_computed_multiplier(free, staff, redis_client) -> None:
    """MODE 'enforce': the same overload cuts the free plan's limit by the computed multiplier."""
    overload(redis_client)
    computed = read_state(board_of(redis_client))["multipliers"][str(free.pk)]
    assert read_multipliers(board_of(redis_client)) == {free.pk: computed}
    assert int(limit_seen(free)) < 10
    assert staff.get("/dashboard/data.json").json()["adaptive"]["mode"] == "enforce"
    assert gauge(staff, "quota_adaptive_multiplier", "free") == computed
