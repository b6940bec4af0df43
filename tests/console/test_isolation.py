"""Tenant isolation and roles on every route of the self-service API, found from its URL patterns (a route added
later is covered without touching this file): another subscription's people get 404, whether they name that
subscription or name their own with its objects' ids; members and keys get 403 on every change; nothing is
changed or audited by a refused request."""

from __future__ import annotations

import pytest
from django.urls import URLPattern
from django.utils import timezone
from rest_framework.test import APIClient

from console import urls as console_urls
from console.models import AuditEntry
from notifications.models import Contact, Delivery, Endpoint, Event
from notifications.secrets import encrypt, new_secret
from plans.models import APIKey

from .conftest import signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

CHANGES = ("post", "put", "patch", "delete")


def routes() -> list[tuple[str, str]]:
    """(route, method) of every subscription's route of the console API, each method its view answers."""
    found = []
    for pattern in console_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        route = str(pattern.pattern)
        if "<int:subscription_id>" not in route:
            continue
        view = pattern.callback.view_class  # type: ignore[attr-defined]
        found += [(route, m) for m in ("get", *CHANGES) if hasattr(view, m)]
    return found


ROUTES = routes()


@pytest.fixture
def objects(team):
    """One of each object the routes name, all Acme's."""
    key = APIKey.objects.get(subscription=team.subscription)
    endpoint = Endpoint.objects.create(subscription=team.subscription, url="https://hooks.example.com/q",
                                       secret_encrypted=encrypt(new_secret()))  # fmt: skip
    contact = Contact.objects.create(subscription=team.subscription, email="ops@acme.example")
    event = Event.objects.create(type="refusals.sustained", subscription=team.subscription, dedupe_key="x",
                                 data={}, created_at=timezone.now())  # fmt: skip
    delivery = Delivery.objects.create(event=event, endpoint=endpoint, body="{}", status="succeeded")
    return {"key_id": key.pk, "endpoint_id": endpoint.pk, "contact_id": contact.pk, "delivery_id": delivery.pk}


def url(route: str, subscription_id: int, objects: dict[str, int]) -> str:
    path = route.replace("<int:subscription_id>", str(subscription_id))
    for name, pk in objects.items():
        path = path.replace(f"<int:{name}>", str(pk))
    path = path.replace("<str:period>", "day")
    assert "<" not in path, path
    return "/api/v1/" + path


def names_an_object(route: str) -> bool:
    return any(f"<int:{name}>" in route for name in ("key_id", "endpoint_id", "contact_id", "delivery_id"))


def state(team) -> tuple:
    """What a refused request must leave as it was."""
    key = APIKey.objects.get(subscription=team.subscription)
    return (
        key.revoked_at, key.expires_at, key.own_rates, Endpoint.objects.values_list("url", "is_active").first(),
        Contact.objects.values_list("email", "is_active").first(), AuditEntry.objects.count(),
        Delivery.objects.values_list("status").first(),
    )  # fmt: skip


def test_the_routes_are_found():
    assert len(ROUTES) > 20


@pytest.mark.parametrize(("route", "method"), ROUTES)
def test_another_subscriptions_people_find_nothing(team, other_team, objects, route, method):
    before = state(team)
    other_key = APIClient()
    other_key.credentials(HTTP_X_API_KEY=other_team.key)
    callers = {"owner": signed_in(other_team.owner), "member": signed_in(other_team.member), "key": other_key}
    for who, client in callers.items():
        # Acme's subscription by its id, and Acme's objects under the caller's own subscription's id.
        for subscription_id in (team.subscription.pk, other_team.subscription.pk):
            if subscription_id == other_team.subscription.pk and not names_an_object(route):
                continue  # the route names no object: it is the caller's own subscription's
            target = url(route, subscription_id, objects)
            status = getattr(client, method)(target, {}, format="json").status_code
            allowed = (404,) if subscription_id == team.subscription.pk or who == "owner" else (403, 404)
            assert status in allowed, (who, method, target, status)
    assert state(team) == before


@pytest.mark.parametrize(("route", "method"), [(r, m) for r, m in ROUTES if m in CHANGES])
def test_members_and_keys_change_nothing(team, objects, member_api, key_api, route, method):
    before = state(team)
    target = url(route, team.subscription.pk, objects)
    for who, client in (("member", member_api), ("key", key_api)):
        response = getattr(client, method)(target, {}, format="json")
        assert response.status_code == 403, (who, method, target, response.status_code)
        assert response["Content-Type"] == "application/problem+json"
    assert state(team) == before


@pytest.mark.parametrize(("route", "method"), [(r, m) for r, m in ROUTES if m == "get"])
def test_members_and_keys_read(team, objects, member_api, key_api, owner_api, route, method):
    target = url(route, team.subscription.pk, objects)
    readers = (("member", member_api), ("key", key_api)) if not route.endswith("audit") else ()
    for who, client in (*readers, ("owner", owner_api)):
        assert client.get(target).status_code == 200, (who, target)
