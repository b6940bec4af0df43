"""Fixtures for the dashboard tests: the demo plans, and real traffic sent through the throttle and flushed."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from django.test import Client as DjangoClient

from demo.seed import demo_key
from plans.models import APIKey, Subscription
from quotas.engine import default_engine
from quotas.identity.clients import hash_api_key
from tests.conftest import skip_or_fail
from tests.factories import UserFactory
from usage.flush import flush_usage

from .browser import ARGS, ARTIFACTS, CHROMIUM


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
    # allowances' and the engine's batched counts into Redis, as its poller does every second
    default_engine.runtime().tick()
    flush_usage()
    return Traffic(subscription_of(demo_key("free")), subscription_of(demo_key("pro")), codes)


@pytest.fixture
def staff(db) -> DjangoClient:
    client = DjangoClient()
    client.force_login(UserFactory(username="ops", is_staff=True, is_superuser=True))
    return client


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    if not shutil.which(CHROMIUM):
        skip_or_fail(f"needs Chromium at {CHROMIUM}: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("needs the playwright package (requirements-dev.txt)")
    # Playwright's sync API keeps an event loop running in this thread, so Django would refuse every ORM call
    # the tests (and their database teardown) make meanwhile; they are synchronous and safe: lift the guard
    # while the browser runs.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as pw:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium) -> Iterator[object]:
    ARTIFACTS.mkdir(exist_ok=True)
    # A viewer far from UTC: times must show in their zone (dashboard/glance.js), UTC on hover.
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, timezone_id="Asia/Tokyo")
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@pytest.fixture
def live_demo(transactional_db) -> None:
    """The demo plans and keys, committed: a live server (another thread) must see them."""
    call_command("seed_demo", stdout=open(os.devnull, "w"))  # noqa: SIM115 - closed at exit
