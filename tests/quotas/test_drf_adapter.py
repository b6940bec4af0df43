"""The DRF adapter seen from a project: authentication by API key, refusals as DRF exceptions, handlers."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", monthly_price=Decimal("0"), is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="2/min", algorithm="fixed_window")
    return plan


@pytest.fixture
def client():
    return APIClient(raise_request_exception=False)


def test_api_key_authentication_sets_request_user_and_auth(client, free):
    """A good key: request.user is the key's holder (authenticated, no staff rights), request.auth its subscription."""
    key = issue_key(plan=free)
    body = client.get("/t/whoami", HTTP_X_API_KEY=key).json()
    assert body["authenticated"] is True
    assert body["plan"] == free.pk
    assert body["subscription"] is not None
    assert body["user"] == f"API key of subscription {body['subscription']}"


def test_the_key_is_read_from_the_header_the_settings_name(client, free, set_quotas):
    """``API_KEY_HEADER`` changed: the key is read from the new header only, from the next request on."""
    key = issue_key(plan=free)
    assert client.get("/t/whoami", HTTP_X_API_KEY=key).json()["plan"] == free.pk
    set_quotas(API_KEY_HEADER="X-Partner-Key")
    assert client.get("/t/whoami", HTTP_X_PARTNER_KEY=key).json()["plan"] == free.pk
    assert client.get("/t/whoami", HTTP_X_API_KEY=key).json()["authenticated"] is False


def test_no_key_leaves_authentication_to_the_next_class(client, free):
    """Without the header the request is anonymous (or whatever the next class finds)."""
    body = client.get("/t/whoami").json()
    assert body == {"user": "AnonymousUser", "authenticated": False, "subscription": None, "plan": None}


def test_bad_key_is_401_with_the_api_key_challenge(client, free):
    """A bad key is DRF's AuthenticationFailed: 401, the class's WWW-Authenticate, a problem body."""
    response = client.get("/t/whoami", HTTP_X_API_KEY="qk_not_a_key")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["reason"] == "api_key_unknown"


def test_bad_key_is_403_when_another_class_comes_first(client, free):
    """DRF's rule: the first authentication class gives the challenge; without one the failure is a 403."""
    response = client.get("/t/session-first", HTTP_X_API_KEY="qk_not_a_key")
    assert response.status_code == 403
    assert "WWW-Authenticate" not in response
    body = response.json()
    assert body["status"] == 403
    assert body["reason"] == "api_key_unknown"


def test_projects_own_exception_handler_sees_an_ordinary_throttled(client, free, settings):
    """With DRF's default handler, a refusal is DRF's usual 429: {"detail"}, Retry-After, and our headers."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "EXCEPTION_HANDLER": "rest_framework.views.exception_handler"}
    key = issue_key(plan=free)
    for _ in range(2):
        assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200
    response = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    assert set(response.json()) == {"detail"}
    assert "allows 2 requests per minute" in response.json()["detail"]
    assert 1 <= int(response["Retry-After"]) <= 60
    assert response["RateLimit"].startswith('"global";r=0;t=')


def test_problem_response_composes_with_a_projects_handler(client, free, settings):
    """problem_response() answers quota refusals; everything else stays the project's handler's."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "EXCEPTION_HANDLER": "tests.urls.composed_exception_handler"}
    key = issue_key(plan=free)
    missing = client.get("/t/missing", HTTP_X_API_KEY=key)
    assert missing.status_code == 404
    assert missing["X-Handled-By"] == "project"
    client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    refused = client.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/problem+json"
    assert "X-Handled-By" not in refused
    body = json.loads(refused.content)
    assert body["reason"] == "rate_limited"
    assert int(refused["Retry-After"]) == body["retry_after"]


def test_quota_handler_leaves_other_errors_to_drf(client, free):
    """quotas.drf.handlers.exception_handler renders only quota refusals itself; a 404 is DRF's."""
    response = client.get("/t/missing", HTTP_X_API_KEY=issue_key(plan=free))
    assert response.status_code == 404
    assert response.json() == {"detail": "no such thing"}
