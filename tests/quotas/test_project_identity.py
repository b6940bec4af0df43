"""A project's own API keys in the same header, and its own way of naming client addresses."""

from __future__ import annotations

import json
import logging

import pytest

from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="2/min", algorithm="fixed_window")
    return plan


def ping(client, **extra):
    return client.get("/api/demo/ping", **extra)


def test_every_key_in_the_header_is_ours_by_default(client, free):
    """Without API_KEY_PREFIXES a key this platform does not know is refused (401)."""
    response = ping(client, HTTP_X_API_KEY="theirs-1234")
    assert response.status_code == 401
    assert json.loads(response.content)["reason"] == "api_key_unknown"


def test_a_key_without_our_prefix_is_left_to_the_project(client, free, set_quotas):
    """With API_KEY_PREFIXES ['qk_'], the project's own key is not ours: no 401, the request is limited by its
    address like any anonymous one; a key with our prefix is still checked, and ours still work."""
    set_quotas(API_KEY_PREFIXES=["qk_"])
    codes = [ping(client, HTTP_X_API_KEY="theirs-1234", REMOTE_ADDR="203.0.113.5").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    assert ping(client, HTTP_X_API_KEY="qk_not-issued").status_code == 401
    assert ping(client, HTTP_X_API_KEY=issue_key(plan=free)).status_code == 200


def test_the_project_names_the_client_address(client, free, set_quotas):
    """CLIENT_IP names the address everywhere: two clients behind one peer are limited apart."""
    set_quotas(CLIENT_IP="tests.client_ip_hook.from_header")
    first = [ping(client, REMOTE_ADDR="10.0.0.1", HTTP_X_CLIENT="198.51.100.7").status_code for _ in range(3)]
    assert first == [200, 200, 429]
    assert ping(client, REMOTE_ADDR="10.0.0.1", HTTP_X_CLIENT="198.51.100.8").status_code == 200


def test_an_address_the_project_cannot_name_is_the_unknown_peer(client, free, set_quotas, caplog, monkeypatch):
    """None or garbage from the hook: one shared anonymous limit, and a warning once per process."""
    from quotas.identity import addresses

    monkeypatch.setattr(addresses, "_warned_hook", False)
    set_quotas(CLIENT_IP="tests.client_ip_hook.from_header")
    with caplog.at_level(logging.WARNING, logger="quotas.identity.addresses"):
        codes = [ping(client, HTTP_X_CLIENT="not-an-address").status_code for _ in range(2)]
        codes.append(ping(client).status_code)  # no header at all: the same unknown peer
    assert codes == [200, 200, 429]
    assert caplog.text.count("named no IP address") == 1


def test_the_settings_are_checked(set_quotas):
    from quotas.checks import check_settings

    set_quotas(API_KEY_PREFIXES=["qk_", ""], CLIENT_IP="no.such.module.function")
    ids = {m.id for m in check_settings(None)}
    assert {"quotas.E054", "quotas.E055"} <= ids
