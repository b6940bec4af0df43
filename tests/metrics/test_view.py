"""GET /metrics: who may read it, and what it serves."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from quotas import metrics

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_token(monkeypatch, settings):
    """No token unless a test sets one (the developer's environment must not leak in)."""
    monkeypatch.delenv("METRICS_TOKEN", raising=False)
    if hasattr(settings, "METRICS_TOKEN"):
        del settings.METRICS_TOKEN


def test_loopback_reads_the_metrics_when_no_token_is_set(client):
    metrics.observe_decision("free", "search", "allowed", "none", 0.0002)
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert response["Cache-Control"] == "no-store"
    assert b'quota_decisions_total{outcome="allowed",plan="free",reason="none",scope="search"}' in response.content


def test_ipv6_loopback_is_loopback_too(client):
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_other_peers_are_refused_when_no_token_is_set(client):
    response = client.get("/metrics", REMOTE_ADDR="192.0.2.10")
    assert response.status_code == 403
    assert b"quota_" not in response.content


def test_a_proxied_request_is_not_loopback_even_from_a_local_proxy(client):
    """A reverse proxy on the same host would make every client look local."""
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.7").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_FORWARDED="for=198.51.100.7").status_code == 403


@pytest.mark.parametrize("source", ["env", "setting"])
def test_with_a_token_the_bearer_token_is_required_even_from_loopback(client, monkeypatch, settings, source):
    if source == "env":
        monkeypatch.setenv("METRICS_TOKEN", "s3cret-token")
    else:
        settings.METRICS_TOKEN = "s3cret-token"
    missing = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    wrong = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401
    right = client.get("/metrics", REMOTE_ADDR="192.0.2.10", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert right.status_code == 200
    assert b"quota_decisions_total" in right.content or b"# HELP quota_decisions_total" in right.content


def test_staff_may_read_from_anywhere_other_users_may_not(monkeypatch):
    monkeypatch.setenv("METRICS_TOKEN", "s3cret-token")
    user_model = get_user_model()
    staff = user_model.objects.create_user("ops", password="x", is_staff=True)
    plain = user_model.objects.create_user("customer", password="x")
    browser = Client(REMOTE_ADDR="192.0.2.10")
    browser.force_login(plain)
    assert browser.get("/metrics").status_code == 401
    browser.force_login(staff)
    assert browser.get("/metrics").status_code == 200


def test_openmetrics_is_served_when_the_scraper_asks_for_it(client):
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_ACCEPT="application/openmetrics-text")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.rstrip().endswith(b"# EOF")
