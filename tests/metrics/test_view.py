"""GET /metrics: who may read it, and what it serves."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from prometheus_client import REGISTRY

from quotas import metrics

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_token(set_quotas):
    """No token unless a test sets one (the project's settings read it from the environment)."""
    set_quotas("METRICS", TOKEN="")


@pytest.fixture
def loopback_allowed(set_quotas):
    set_quotas("METRICS", ALLOW_LOOPBACK=True)


def test_by_default_even_loopback_needs_the_token(client):
    """A local reverse proxy that adds no X-Forwarded-For would make every client look local."""
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    body = json.loads(response.content)
    assert "QUOTAS['METRICS']['TOKEN']" in body["detail"]
    assert "QUOTAS['METRICS']['ALLOW_LOOPBACK']" in body["detail"]
    assert b"quota_" not in response.content.replace(b"quotas", b"")


def test_loopback_reads_the_metrics_when_the_project_allows_it(client, loopback_allowed):
    metrics.observe_decision("free", "search", "allowed", "none", 0.0002)
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert response["Cache-Control"] == "no-store"
    assert b'quota_decisions_total{outcome="allowed",plan="free",reason="none",scope="search"}' in response.content


def test_ipv6_loopback_is_loopback_too(client, loopback_allowed):
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_other_peers_are_refused_when_no_token_is_set(client, loopback_allowed):
    response = client.get("/metrics", REMOTE_ADDR="192.0.2.10")
    assert response.status_code == 403
    assert b"quota_" not in response.content


def test_a_proxied_request_is_not_loopback_even_from_a_local_proxy(client, loopback_allowed):
    """A reverse proxy on the same host would make every client look local."""
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.7").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_FORWARDED="for=198.51.100.7").status_code == 403


def test_with_a_token_the_bearer_token_is_required_even_from_loopback(client, set_quotas, loopback_allowed):
    """The token is QUOTAS['METRICS']['TOKEN']."""
    set_quotas("METRICS", TOKEN="s3cret-token")
    missing = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert missing["Content-Type"] == "application/problem+json"
    wrong = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401
    right = client.get("/metrics", REMOTE_ADDR="192.0.2.10", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert right.status_code == 200
    assert b"quota_decisions_total" in right.content or b"# HELP quota_decisions_total" in right.content


@pytest.mark.parametrize("where", ["environment", "top-level setting"])
def test_the_token_is_read_from_quotas_alone(client, monkeypatch, settings, where):
    """The library reads no METRICS_TOKEN of its own (the project maps its variable into QUOTAS)."""
    settings.QUOTAS = {**settings.QUOTAS, "METRICS": {"ALLOW_LOOPBACK": False}}  # no TOKEN key
    if where == "environment":
        monkeypatch.setenv("METRICS_TOKEN", "s3cret-token")
    else:
        settings.METRICS_TOKEN = "s3cret-token"
    response = client.get("/metrics", REMOTE_ADDR="192.0.2.10", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert response.status_code == 403  # no token is set: the bearer is no one's


def test_staff_may_read_from_anywhere_other_users_may_not(set_quotas):
    set_quotas("METRICS", TOKEN="s3cret-token")
    user_model = get_user_model()
    staff = user_model.objects.create_user("ops", password="x", is_staff=True)
    plain = user_model.objects.create_user("customer", password="x")
    browser = Client(REMOTE_ADDR="192.0.2.10")
    browser.force_login(plain)
    assert browser.get("/metrics").status_code == 401
    browser.force_login(staff)
    assert browser.get("/metrics").status_code == 200


def test_openmetrics_is_served_when_the_scraper_asks_for_it(client, loopback_allowed):
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_ACCEPT="application/openmetrics-text")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.rstrip().endswith(b"# EOF")


def test_anonymous_healthz_says_only_the_status_and_mode(client, redis_server):
    """No Redis address, port or error text for anyone on the internet; the failure mode in force, yes."""
    assert client.get("/healthz").json() == {"status": "ok", "engine": {"mode": "normal", "failure_mode": "local"}}
    redis_server.stop()
    try:
        response = client.get("/healthz")
    finally:
        redis_server.start()
    assert response.status_code == 503
    assert response.json() == {"status": "degraded", "engine": {"mode": "fallback", "failure_mode": "local"}}
    assert b"127.0.0.1" not in response.content
    assert str(redis_server.port).encode() not in response.content


def test_staff_and_token_holders_get_healthz_details(client, set_quotas, redis_server):
    set_quotas("METRICS", TOKEN="s3cret-token")
    redis_server.stop()
    try:
        with_token = client.get("/healthz", HTTP_AUTHORIZATION="Bearer s3cret-token").json()
        wrong = client.get("/healthz", HTTP_AUTHORIZATION="Bearer nope").json()
        staff = get_user_model().objects.create_user("ops", password="x", is_staff=True)
        browser = Client()
        browser.force_login(staff)
        as_staff = browser.get("/healthz").json()
    finally:
        redis_server.start()
    assert "redis" not in wrong
    for body in (with_token, as_staff):
        assert body["redis"]["reachable"] is False
        assert body["redis"]["error"]
        assert body["engine"]["failure_mode"] == "local"


def assert_auth_throttled(response) -> None:
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 600
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["reason"] == "failed_authentications"


@pytest.mark.parametrize("path", ["/metrics", "/healthz"])
def test_wrong_tokens_count_as_failed_authentications(client, set_quotas, path):
    """Three wrong tokens per address are answered as usual; the fourth attempt from that address, even with
    the right token, gets 429 with Retry-After. Other addresses, and staff, are not affected."""
    set_quotas("METRICS", TOKEN="s3cret-token")
    set_quotas(FAILED_AUTH_LIMITS={"address": "3/10min", "username": None})
    guesser = {"REMOTE_ADDR": "203.0.113.9"}
    counted = failed_auth_sample("counted")
    for i in range(3):
        response = client.get(path, HTTP_AUTHORIZATION=f"Bearer guess-{i}", **guesser)
        if path == "/metrics":
            assert response.status_code == 401
        else:
            assert response.status_code == 200
            assert "redis" not in response.json()  # the details are for the right token only
    assert failed_auth_sample("counted") == counted + 3
    assert_auth_throttled(client.get(path, HTTP_AUTHORIZATION="Bearer guess-3", **guesser))
    assert_auth_throttled(client.get(path, HTTP_AUTHORIZATION="Bearer s3cret-token", **guesser))
    right = client.get(path, HTTP_AUTHORIZATION="Bearer s3cret-token", REMOTE_ADDR="198.51.100.4")
    assert right.status_code == 200
    staff = get_user_model().objects.create_user("ops", password="x", is_staff=True)
    browser = Client(**guesser)
    browser.force_login(staff)
    assert browser.get(path, HTTP_AUTHORIZATION="Bearer stale").status_code == 200


def test_only_bearer_attempts_at_a_set_token_are_counted(client, set_quotas):
    """No token set: nothing to guess, a bearer header is not counted. Other schemes and no header are no
    attempt at the token either."""
    set_quotas(FAILED_AUTH_LIMITS={"address": "1/10min", "username": None})
    for _ in range(3):
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer x", REMOTE_ADDR="203.0.113.10").status_code == 403
    set_quotas("METRICS", TOKEN="s3cret-token")
    for extra in ({}, {"HTTP_AUTHORIZATION": "Basic eDp5"}, {}):
        assert client.get("/metrics", REMOTE_ADDR="203.0.113.10", **extra).status_code == 401
    right = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token", REMOTE_ADDR="203.0.113.10")
    assert right.status_code == 200


def failed_auth_sample(outcome: str) -> float:
    return REGISTRY.get_sample_value("quota_failed_authentications_total", {"outcome": outcome}) or 0.0


@pytest.mark.parametrize("peer", [{"REMOTE_ADDR": ""}, {"REMOTE_ADDR": "unix:/run/gunicorn.sock"}])
def test_token_guesses_from_clients_without_an_address_are_counted_too(client, set_quotas, peer):
    """A client with no address (a Unix-socket proxy not trusted, a CLIENT_IP hook answering None) guesses
    against a tag all such clients share: past the limit even the right token gets 429 from them."""
    set_quotas("METRICS", TOKEN="s3cret-token")
    set_quotas(FAILED_AUTH_LIMITS={"address": "3/10min", "username": None})
    for i in range(3):
        assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer guess-{i}", **peer).status_code == 401
    assert_auth_throttled(client.get("/metrics", HTTP_AUTHORIZATION="Bearer guess-3", **peer))
    assert_auth_throttled(client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token", **peer))
    # Clients with an address are not affected.
    right = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token", REMOTE_ADDR="198.51.100.4")
    assert right.status_code == 200
