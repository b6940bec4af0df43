"""Guessing is slowed down: failed authentications per address and per username end in 429 + Retry-After."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="1000/min")
    return plan


@pytest.fixture
def tight(settings):
    """Three failures per address, two per username, per 10 minutes."""
    settings.QUOTAS = {**settings.QUOTAS, "FAILED_AUTH_LIMITS": {"address": "3/10min", "username": "2/10min"}}


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def assert_throttled_problem(response) -> None:
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 600
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["reason"] == "failed_authentications"


def test_guessing_api_keys_is_refused_after_the_limit_even_with_a_right_key(free, tight):
    api, good = APIClient(), issue_key(plan=free)
    codes = [api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR="203.0.113.5").status_code
             for i in range(3)]  # fmt: skip
    assert codes == [401, 401, 401]
    assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY="qk_guess_4", REMOTE_ADDR="203.0.113.5"))
    # A lucky guess from the blocked address learns nothing; the same key elsewhere works.
    assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY=good, REMOTE_ADDR="203.0.113.5"))
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=good, REMOTE_ADDR="198.51.100.1").status_code == 200
    # Anonymous requests (no credentials) from that address are not authentication attempts.
    assert api.get("/api/demo/ping", REMOTE_ADDR="203.0.113.5").status_code == 200


def test_the_usage_api_counts_bad_keys_too(free, tight):
    api = APIClient()
    for i in range(3):
        assert api.get("/api/v1/usage/", HTTP_X_API_KEY=f"qk_bad_{i}", REMOTE_ADDR="203.0.113.6").status_code == 401
    assert_throttled_problem(api.get("/api/v1/usage/", HTTP_X_API_KEY="qk_bad_x", REMOTE_ADDR="203.0.113.6"))


def test_wrong_basic_passwords_are_refused_after_the_limit_then_the_right_one_too(free, tight):
    UserFactory(username="alice", password=PASSWORD)
    api = APIClient()
    for _ in range(2):
        wrong = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", "nope"), REMOTE_ADDR="203.0.113.7")
        assert wrong.status_code == 401
    assert_throttled_problem(
        api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", "nope"), REMOTE_ADDR="203.0.113.7")
    )
    # Per username: the right password from another address is refused too while the block lasts.
    assert_throttled_problem(
        api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", PASSWORD), REMOTE_ADDR="198.51.100.2")
    )
    # Another user from a fresh address is not concerned.
    UserFactory(username="bob", password=PASSWORD)
    ok = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("bob", PASSWORD), REMOTE_ADDR="198.51.100.3")
    assert ok.status_code == 200


def test_admin_login_is_refused_with_429_after_too_many_wrong_passwords(tight):
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    browser = Client(REMOTE_ADDR="203.0.113.8")
    url = "/admin/login/?next=/admin/"
    for _ in range(2):
        page = browser.post(url, {"username": "ops", "password": "nope"})
        assert page.status_code == 200  # the form again, with Django's own error
    refused = browser.post(url, {"username": "ops", "password": "nope"})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert "Too many failed sign-ins" in refused.content.decode()
    right = browser.post(url, {"username": "ops", "password": PASSWORD})
    assert right.status_code == 429  # the right password is refused while blocked
    assert "_auth_user_id" not in browser.session


def test_a_human_who_mistypes_twice_signs_in_with_the_defaults(free):
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    browser = Client(REMOTE_ADDR="203.0.113.9")
    url = "/admin/login/?next=/admin/"
    for _ in range(2):
        assert browser.post(url, {"username": "ops", "password": "typo"}).status_code == 200
    assert browser.post(url, {"username": "ops", "password": PASSWORD}).status_code == 302


def test_the_limit_is_the_number_of_failures_allowed_then_even_the_right_key_is_refused(free, tight):
    """ "3/10min": three wrong keys are answered 401; the fourth attempt, whatever its key, is refused."""
    api, good = APIClient(), issue_key(plan=free)
    for i in range(3):
        assert api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR="203.0.113.10").status_code == 401
    assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY=good, REMOTE_ADDR="203.0.113.10"))


def test_a_password_block_holds_in_a_process_that_saw_none_of_the_failures(free, tight):
    """Another process (here: this one, having forgotten what it learnt) asks Redis before checking a
    password: the right password is refused there too, for the rest of the window."""
    from quotas.identity.auth_failures import failed_auth

    UserFactory(username="alice", password=PASSWORD, is_staff=True)
    api = APIClient()
    for _ in range(2):
        wrong = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", "nope"), REMOTE_ADDR="203.0.113.11")
        assert wrong.status_code == 401
    failed_auth.clear()  # what a process that served none of these requests knows
    assert_throttled_problem(
        api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", PASSWORD), REMOTE_ADDR="198.51.100.11")
    )
    failed_auth.clear()
    refused = Client(REMOTE_ADDR="198.51.100.12").post(
        "/admin/login/?next=/admin/", {"username": "alice", "password": PASSWORD}
    )
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 600


def test_while_redis_is_down_failures_are_not_counted_and_sign_in_still_works(tight, redis_server, caplog):
    """Authentication does not depend on Redis: failing open, logged (once, not per attempt) and counted."""
    from prometheus_client import REGISTRY

    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    browser = Client(REMOTE_ADDR="203.0.113.12")
    url = "/admin/login/?next=/admin/"

    def uncounted() -> float:
        return REGISTRY.get_sample_value("quota_failed_authentications_total", {"outcome": "uncounted"}) or 0.0

    before = uncounted()
    redis_server.stop()
    try:
        for _ in range(4):
            assert browser.post(url, {"username": "ops", "password": "nope"}).status_code == 200
        assert browser.post(url, {"username": "ops", "password": PASSWORD}).status_code == 302
    finally:
        redis_server.start()
    assert uncounted() - before == 8  # four failures, each per address and per username
    logged = [r for r in caplog.records if "not limited while Redis is unreachable" in r.getMessage()]
    assert len(logged) == 1
