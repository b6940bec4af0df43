"""Who may see and change a subscription: owners change, members read, keys read and never manage, and a
subscription one has no role on does not exist (404) for one."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from console.models import AuditEntry, Membership, Role

from .conftest import signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def test_the_account_lists_each_subscription_with_the_callers_role(team, other_team):
    Membership.objects.create(subscription=other_team.subscription, user=team.owner, role=Role.MEMBER)
    body = signed_in(team.owner).get("/api/v1/account").json()
    assert [(row["name"], row["plan"], row["role"]) for row in body] == [
        ("Acme", "pro", "owner"),
        ("Globex", "free", "member"),
    ]
    assert [row["role"] for row in signed_in(team.member).get("/api/v1/account").json()] == ["member"]


def test_an_api_key_sees_its_own_subscription_as_a_key(team, key_api):
    limits = {"max_webhook_endpoints": 10, "max_contacts": 10}  # QUOTAS['NOTIFICATIONS']'s defaults
    assert key_api.get("/api/v1/account").json() == [
        {"id": team.subscription.pk, "name": "Acme", "plan": "pro", "role": "key", **limits}
    ]


def test_anonymous_callers_get_a_401_problem(team):
    response = APIClient().get("/api/v1/account")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert APIClient().get(team.url("audit")).status_code == 401


def test_owners_read_the_audit_log_and_members_and_keys_may_not(team, owner_api, member_api, key_api):
    AuditEntry.objects.create(
        subscription=team.subscription, subscription_name="Acme", actor=team.owner, actor_name="olivia",
        action="key.create", target="qk_abc", address="203.0.113.9",
    )  # fmt: skip
    body = owner_api.get(team.url("audit")).json()
    assert [(e["actor"], e["action"], e["target"], e["address"]) for e in body] == [
        ("olivia", "key.create", "qk_abc", "203.0.113.9")
    ]
    for client, says in ((member_api, "Members may read"), (key_api, "An API key cannot manage")):
        refused = client.get(team.url("audit"))
        assert refused.status_code == 403
        assert refused["Content-Type"] == "application/problem+json"
        assert says in refused.json()["detail"]


def test_another_subscriptions_people_find_nothing(team, other_team, stranger_api):
    other_key = APIClient()
    other_key.credentials(HTTP_X_API_KEY=other_team.key)
    for client in (stranger_api, signed_in(other_team.member), other_key):
        response = client.get(team.url("audit"))
        assert response.status_code == 404
        assert response["Content-Type"] == "application/problem+json"
    assert signed_in(other_team.owner).get("/api/v1/subscriptions/999999/audit").status_code == 404


def test_the_console_has_a_rate_limit_of_its_own(team, settings):
    settings.QUOTAS = {**settings.QUOTAS, "CONSOLE": {"API_RATE": "2/min"}}
    client = signed_in(team.owner)
    statuses = [client.get("/api/v1/account").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert client.get("/api/v1/usage/current").status_code == 200  # the usage API's allowance is its own
