"""The client page's "Last refusals": what refused the client, with the limit, remaining and reset at that moment."""

from __future__ import annotations

import re

import pytest
from django.test import Client as DjangoClient

from demo.seed import demo_key
from quotas.engine import default_engine
from tests.factories import UserFactory
from tests.quotas.test_adaptive_engine import publish

from .conftest import send, subscription_of

pytestmark = pytest.mark.django_db


def test_the_client_page_shows_its_last_refusals(staff, demo):
    """Free's 11th search of the minute is refused; after the poller's tick its page shows the search limit
    (10 per 60 s), remaining 0 and the reset, linked from the overview's top-denied table."""
    assert send(DjangoClient(), demo_key("free"), 11, "/api/demo/search?q=x") == {200: 10, 429: 1}
    default_engine.runtime().tick()  # what the poller thread does every second
    sub = subscription_of(demo_key("free"))
    rows = refusal_table(staff, sub.pk)
    # One row per refusing window: the search limit, and the 10/s one too when the 11 fell within a second.
    [(time, reason, scope, _limit, window, remaining, reset, retry)] = [r for r in rows if r[3] == "search: 10"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", time)  # the viewer's zone once glance.js runs
    assert (reason, scope, window, remaining) == ("rate", "search", "60 s", "0")
    assert re.fullmatch(r"in (\d|[1-5]\d|60) s|in 1 min", reset), reset
    assert re.fullmatch(r"in (\d|[1-5]\d|60) s|in 1 min", retry), retry
    top = staff.get("/dashboard/data.json").json()["top_clients"][0]
    assert top["url"] == f"/dashboard/clients/s.{sub.pk}/#refusals"


def test_a_capacity_refusal_shows_remaining_0_not_a_negative_count(staff, demo, redis_client):
    """Free's 7th search of the minute, with its 10/min search limit cut to 5 by a multiplier of 0.5, is refused
    for capacity (503): its row says remaining 0 (not 5 - 6 = -1)."""
    client = DjangoClient()
    assert send(client, demo_key("free"), 6, "/api/demo/search?q=x") == {200: 6}
    sub = subscription_of(demo_key("free"))
    publish(redis_client, {str(sub.plan_id): 0.5})
    assert send(client, demo_key("free"), 1, "/api/demo/search?q=x") == {503: 1}
    default_engine.runtime().tick()
    rows = refusal_table(staff, sub.pk)
    [search] = [r for r in rows if r[3] == "search: 5"]
    assert (search[1], search[5]) == ("capacity", "0")
    assert all(not r[5].startswith("-") for r in rows), rows


def refusal_table(staff, subscription_id: int) -> list[list[str]]:
    """The cells' text of each row of a client page's "Last refusals" table."""
    page = staff.get(f"/dashboard/clients/s.{subscription_id}/").content.decode()
    table = page[page.index('id="refusals"') : page.index("</table>", page.index('id="last-refusals"'))]
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", "<td>" + row, re.S)]
        for row in re.findall(r"<tr><td>(.*?)</tr>", table, re.S)
    ]


def test_a_client_never_refused_has_an_empty_table(staff, demo):
    sub = subscription_of(demo_key("pro"))
    page = staff.get(f"/dashboard/clients/s.{sub.pk}/").content.decode()
    assert "No refusal in the last 24 hours." in page


def test_non_staff_are_sent_to_the_login_and_staff_without_the_permission_get_403(client, demo):
    sub = subscription_of(demo_key("free"))
    path = f"/dashboard/clients/s.{sub.pk}/"
    client.force_login(UserFactory(username="plain"))
    assert client.get(path)["Location"].startswith("/admin/login/")
    client.force_login(UserFactory(username="staff-only", is_staff=True))
    assert client.get(path).status_code == 403
