"""Bounded fan-out: a subscription has at most ``MAX_ENDPOINTS`` webhook endpoints and ``MAX_CONTACTS`` e-mail
contacts (every event goes to each). One more is a 400 problem naming the limit, on the API and the page, and
changes nothing; the account answer gives the limits and the page shows how many are used."""

from __future__ import annotations

import pytest
from django.test import Client

from console.models import AuditEntry
from notifications.models import Contact, Endpoint
from notifications.secrets import encrypt, new_secret

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

FULL_ENDPOINTS = ("This subscription has 2 webhook endpoints, the most allowed "
                  "(QUOTAS['NOTIFICATIONS']['MAX_ENDPOINTS']): delete one first.")  # fmt: skip
FULL_CONTACTS = ("This subscription has 2 contacts, the most allowed (QUOTAS['NOTIFICATIONS']['MAX_CONTACTS']): "
                 "delete one first.")  # fmt: skip


@pytest.fixture(autouse=True)
def two_each(set_quotas):
    set_quotas("CONSOLE", API_RATE=None)
    set_quotas(NOTIFICATIONS={"ALLOW_PRIVATE_ADDRESSES": True, "ALLOW_HTTP": True, "MAX_ENDPOINTS": 2,
                              "MAX_CONTACTS": 2})  # fmt: skip


def endpoint_of(subscription, n: int) -> Endpoint:
    return Endpoint.objects.create(subscription=subscription, url=f"http://127.0.0.1:9/{n}",
                                   secret_encrypted=encrypt(new_secret()))  # fmt: skip


def test_one_endpoint_more_than_the_limit_is_a_400_naming_it(team, other_team, owner_api, stranger_api):
    """The third endpoint is refused (problem+json: the limit and its setting), nothing saved or audited; another
    subscription's count is its own; once one is deleted, another may be registered."""
    url = team.url("webhooks")
    made = [owner_api.post(url, {"url": f"http://127.0.0.1:9/{n}"}, format="json") for n in range(2)]
    assert [r.status_code for r in made] == [201, 201]
    refused = owner_api.post(url, {"url": "http://127.0.0.1:9/third"}, format="json")
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["detail"] == FULL_ENDPOINTS
    assert refused.json()["errors"] == {"non_field_errors": FULL_ENDPOINTS}
    assert Endpoint.objects.filter(subscription=team.subscription).count() == 2
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["webhook.create"] * 2
    theirs = stranger_api.post(other_team.url("webhooks"), {"url": "http://127.0.0.1:9/x"}, format="json")
    assert theirs.status_code == 201
    assert owner_api.delete(team.url(f"webhooks/{made[0].json()['id']}")).status_code == 204
    assert owner_api.post(url, {"url": "http://127.0.0.1:9/third"}, format="json").status_code == 201


def test_one_contact_more_than_the_limit_is_a_400_naming_it(team, owner_api):
    url = team.url("contacts")
    made = [owner_api.post(url, {"email": f"ops{n}@acme.test"}, format="json") for n in range(2)]
    assert [r.status_code for r in made] == [201, 201]
    refused = owner_api.post(url, {"email": "third@acme.test"}, format="json")
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["errors"] == {"non_field_errors": FULL_CONTACTS}
    assert Contact.objects.count() == 2


def test_the_account_answer_gives_the_limits(team, owner_api):
    (row,) = owner_api.get("/api/v1/account").json()
    assert (row["max_webhook_endpoints"], row["max_contacts"]) == (2, 2)


def test_the_page_shows_how_many_are_used_and_refuses_one_more_with_the_reason(team):
    client = Client()
    client.force_login(team.owner)
    page = f"/usage/account/{team.subscription.pk}/"
    endpoint_of(team.subscription, 1)
    body = client.get(page).content.decode()
    assert '<span id="webhooks-room">1 of 2 endpoints</span>.' in body
    assert '<span id="contacts-room">0 of 2 contacts</span>.' in body
    endpoint_of(team.subscription, 2)
    assert "2 of 2 endpoints</span>: the most allowed" in client.get(page).content.decode()
    refused = client.post(page + "webhooks", {"url": "http://127.0.0.1:9/third"})
    assert refused.status_code == 400
    assert FULL_ENDPOINTS in refused.content.decode().replace("&#x27;", "'")
    assert Endpoint.objects.count() == 2
    Contact.objects.bulk_create(Contact(subscription=team.subscription, email=f"{n}@acme.test") for n in range(2))
    full = client.post(page + "contacts", {"email": "third@acme.test"})
    assert full.status_code == 400
    assert FULL_CONTACTS in full.content.decode().replace("&#x27;", "'")
    assert Contact.objects.count() == 2
    assert not AuditEntry.objects.exists()
