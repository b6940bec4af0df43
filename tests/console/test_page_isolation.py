"""Tenant isolation and roles on every route of the customer's page, found from its URL patterns
(``console.page_urls``) when the tests run, as the API's isolation tests find the API's: a member reads and is
refused every change (403), another subscription's owner finds nothing (404) whether they name this subscription
or their own with this one's ids, a signed-out visitor is sent to sign in, and nothing is changed or audited. A
route added to the page is refused by :func:`test_every_route_is_checked` until it is listed below."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import URLPattern

from console import page_urls
from console.models import AuditEntry
from notifications.models import Contact, Delivery, Endpoint
from plans.models import AlertThresholds, APIKey, SpendCap

from .test_page import Stock, browser, stock  # noqa: F401  (stock: test_page's fixture, one object of each kind)

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

#: The routes that name no subscription: the list of one's subscriptions, signing in and out, and the
#: confirmation e-mail's link (no sign-in: the token is the credential).
NO_SUBSCRIPTION = {"index", "sign-in", "sign-out", "confirm"}
#: A subscription's routes that read (GET): every role on it reads, no one else.
READS = {"subscription"}
#: A subscription's routes that change it (POST), each with a body that would change something.
CHANGES = {
    "cap": {"period": "day", "amount": "1", "action": "set"},
    "thresholds": {"percents": "50"},
    "key-create": {"name": "ci"},
    "key-revoke": {},
    "key-roll": {"overlap_seconds": "3600"},
    "key-limits": {"own_rates": "5/min", "cap_period": ""},
    "webhook-register": {"url": "https://hooks.example.com/other"},
    "webhook-active": {"is_active": "false"},
    "webhook-delete": {},
    "webhook-test": {},
    "webhook-roll-secret": {"overlap_seconds": "0"},
    "delivery-resend": {},
    "contact-add": {"email": "new@acme.test"},
    "contact-delete": {},
}
#: How a route names an object of the subscription, and which of the stock's objects it is.
OBJECTS = {"key_id": "key", "endpoint_id": "endpoint", "delivery_id": "delivery", "contact_id": "contact"}


def page_routes() -> list[tuple[str, str]]:
    """(name, route) of every route of the page, as ``console.page_urls`` has them now."""
    found = []
    for pattern in page_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        assert pattern.name, pattern
        found.append((pattern.name, str(pattern.pattern)))
    return found


ROUTES = [(name, route) for name, route in page_routes() if "<int:subscription_id>" in route]


def test_every_route_is_checked():
    """Each route of the page is a subscription's read, a subscription's change with its body here, or one of
    the routes that name no subscription: a route in none of them fails, by name."""
    unchecked = []
    for name, route in page_routes():
        if "<int:subscription_id>" in route:
            if name not in READS | set(CHANGES):
                unchecked.append(name)
        elif name not in NO_SUBSCRIPTION:
            unchecked.append(name)
    assert unchecked == [], f"routes of console.page_urls no test here checks: {unchecked}"
    assert len(ROUTES) == len(READS | set(CHANGES)) > 10


def url(route: str, subscription_id: int, stock: Stock) -> str:  # noqa: F811
    path = route.replace("<int:subscription_id>", str(subscription_id))
    for name, kind in OBJECTS.items():
        path = path.replace(f"<int:{name}>", str(getattr(stock, kind)))
    assert "<" not in path, f"{route}: name its object in OBJECTS"
    return f"/usage/account/{path}"


def names_an_object(route: str) -> bool:
    return any(f"<int:{name}>" in route for name in OBJECTS)


def state() -> tuple:
    """What a refused request must leave as it was."""
    return (
        list(APIKey.objects.values()), list(Endpoint.objects.values()), list(Contact.objects.values()),
        list(Delivery.objects.values("status", "attempts")), list(SpendCap.objects.values()),
        list(AlertThresholds.objects.values()), AuditEntry.objects.count(),
    )  # fmt: skip


@pytest.mark.parametrize(("name", "route"), ROUTES, ids=[name for name, _ in ROUTES])
def test_only_the_subscriptions_people_reach_it(team, other_team, stock, name, route):  # noqa: F811
    """A change: a member is refused (403); a read: every role reads it. Another subscription's owner finds
    nothing (404), by this subscription's URL and by their own naming this one's objects; a signed-out visitor
    is sent to sign in. Nothing changes, nothing is audited."""
    before = state()
    change = name in CHANGES
    method, body = ("post", CHANGES[name]) if change else ("get", {})
    target = url(route, team.subscription.pk, stock)
    member = getattr(browser(team.member), method)(target, body)
    assert member.status_code == (403 if change else 200), (name, member.status_code)
    stranger = browser(other_team.owner)
    assert getattr(stranger, method)(target, body).status_code == 404, name
    if names_an_object(route):
        theirs = url(route, other_team.subscription.pk, stock)
        assert getattr(stranger, method)(theirs, body).status_code == 404, name
    signed_out = getattr(Client(), method)(target, body)
    assert signed_out.status_code == 302, name
    assert signed_out["Location"].startswith("/usage/account/sign-in/?next="), name
    assert state() == before


@pytest.mark.parametrize(("name", "route"), [(n, r) for n, r in ROUTES if n in READS])
def test_the_owner_reads_it(team, stock, name, route):  # noqa: F811
    assert browser(team.owner).get(url(route, team.subscription.pk, stock)).status_code == 200
