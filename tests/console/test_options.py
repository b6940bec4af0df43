"""``OPTIONS`` on every route of the self-service API, found from its URL patterns (a route added later is walked
too): never a 500. On a subscription's route it is allowed as the route's ``GET`` is (401 without credentials,
404 to another subscription's people, so it says nothing about a subscription that is not theirs); the bodies a
route takes (``actions``) are described to those who may send them: owners (and anyone on the confirmation's
route, which needs no sign-in)."""

from __future__ import annotations

import pytest
from django.urls import URLPattern
from rest_framework.test import APIClient

from console import urls as console_urls

from .test_isolation import objects, url  # noqa: F401  (objects: the isolation tests' fixture, one object of each kind)

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def all_routes() -> list[tuple[str, set[str]]]:
    """(route, the methods with a body it answers) of every console API route, the subscription's and the rest."""
    found = []
    for pattern in console_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        view = pattern.callback.view_class  # type: ignore[attr-defined]
        found.append((str(pattern.pattern), {m.upper() for m in ("put", "post") if hasattr(view, m)}))
    return found


ROUTES = all_routes()


def test_every_route_is_walked():
    assert len(ROUTES) == len(console_urls.urlpatterns) > 15
    assert {route for route, _ in ROUTES} >= {"account", "contacts/confirm"}


@pytest.fixture(autouse=True)
def no_console_rate(set_quotas):
    """The console's own rate limit (60/min) off: each test calls every route several times."""
    set_quotas("CONSOLE", API_RATE=None)


def options(client: APIClient, route: str, team, objects) -> tuple[int, dict]:  # noqa: F811
    response = client.options(url(route, team.subscription.pk, objects))
    assert response.status_code != 500, route
    return response.status_code, response.json()


@pytest.mark.parametrize(("route", "writes"), ROUTES, ids=[route for route, _ in ROUTES])
def test_anonymous_callers_are_answered_as_a_get_is_never_500(team, objects, route, writes):  # noqa: F811
    """A subscription's route: 401 (problem+json), as its GET; the others describe themselves."""
    status, body = options(APIClient(), route, team, objects)
    assert status in (200, 401, 403, 405)
    if "<int:subscription_id>" in route:
        assert (status, body["status"]) == (401, 401)
    else:
        assert status == 200
        assert set(body.get("actions", {})) == (writes if route == "contacts/confirm" else set())


@pytest.mark.parametrize(("route", "writes"), ROUTES, ids=[route for route, _ in ROUTES])
def test_owners_are_told_the_bodies_and_readers_not(team, objects, owner_api, member_api, key_api, route, writes):  # noqa: F811
    status, body = options(owner_api, route, team, objects)
    assert status == 200
    assert body["name"]
    assert set(body.get("actions", {})) == writes
    if "<int:subscription_id>" in route:
        for reader in (member_api, key_api):
            status, body = options(reader, route, team, objects)
            assert (status, "actions" in body) == (200, False), route


@pytest.mark.parametrize("route", [r for r, _ in ROUTES if "<int:subscription_id>" in r])
def test_another_subscriptions_owner_finds_nothing(team, objects, stranger_api, route):  # noqa: F811
    status, body = options(stranger_api, route, team, objects)
    assert (status, "actions" in body) == (404, False)
