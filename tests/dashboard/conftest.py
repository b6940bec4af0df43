"""Fixtures for the dashboard tests: the demo plans, and real traffic sent through the throttle and flushed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from django.test import Client as DjangoClient

from plans.management.commands.seed_demo import demo_key
from plans.models import APIKey, Subscription
from quotas.engine.runtime import get_engine
from quotas.identity.clients import hash_api_key
from tests.factories import UserFactory
from usage.flush import flush_usage


@dataclass
class Traffic:
    """The demo customers and what was sent for them."""

    free: Subscription
    pro: Subscription
    codes: dict[str, Counter]


def send(client: DjangoClient, key: str, n: int, path: str) -> Counter:
    """``n`` GETs of ``path`` with API key ``key``: the count of each status code."""
    return Counter(client.get(path, HTTP_X_API_KEY=key).status_code for _ in range(n))


def subscription_of(raw_key: str) -> Subscription:
    return APIKey.objects.select_related("subscription__plan").get(key_hash=hash_api_key(raw_key)).subscription


@pytest.fixture
def demo(db) -> None:
    """The demo plans (free 10 searches a minute, pro 100, enterprise), one key each."""
    call_command("seed_demo", stdout=open("/dev/null", "w"))  # noqa: SIM115 - closed at exit


@pytest.fixture
def traffic(demo, redis_client) -> Traffic:
    """15 searches by the free customer (5 refused by its 10/min search limit) and 5 by the pro one, flushed."""
    client = DjangoClient()
    codes = {
        "free": send(client, demo_key("free"), 15, "/api/demo/search?q=x"),
        "pro": send(client, demo_key("pro"), 5, "/api/demo/search?q=x"),
    }
    get_engine().flush_usage()  # the engine's batched counts into Redis, as its poller does every second
    flush_usage()
    return Traffic(subscription_of(demo_key("free")), subscription_of(demo_key("pro")), codes)


@pytest.fixture
def staff(db) -> DjangoClient:
    client = DjangoClient()
    client.force_login(UserFactory(username="ops", is_staff=True, is_superuser=True))
    return client
