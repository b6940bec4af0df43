"""The staff dashboard and the client usage page, through Django's test client."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.test import Client as DjangoClient
from django.utils import timezone

from demo.seed import demo_key
from plans.models import ACLEntry, APIKey
from quotas.engine import default_engine
from quotas.internal_api import usage_date
from tests.factories import UserFactory, issue_key
from usage.models import UsageRecord

from .conftest import send, subscription_of

pytestmark = pytest.mark.django_db
BASE_DIR = Path(__file__).resolve().parents[2]
#: Session, user, rules, usage (3 groupings + live rows), names, upgrades (2), adaptive (2), alerts, filters.
MAX_QUERIES = 14


@pytest.mark.parametrize("path", ["/dashboard/", "/dashboard/data.json", "/dashboard/clients/s.1/"])
def test_anonymous_and_non_staff_are_sent_to_the_admin_login(client, path):
    """Without a staff session every dashboard page redirects to the admin login."""
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    client.force_login(UserFactory(username="plain"))
    assert client.get(path)["Location"].startswith("/admin/login/")


def test_data_feed_shows_denials_top_clients_and_upgrade_candidates(staff, traffic):
    """Refusals made by the real throttle show up by reason, per client and scope, with an upgrade offer."""
    assert traffic.codes["free"] == {200: 10, 429: 5}
    body = staff.get("/dashboard/data.json").json()
    assert body["live"] is True
    assert body["totals"]["allowed"] == 15
    assert body["totals"]["rate"] == 5
    assert body["series"]["denied"]["rate"][-1] == 5  # today
    top = body["top_clients"][0]
    assert (top["name"], top["plan"], top["denied"]) == (traffic.free.name, "Free", 5)
    assert top["url"] == f"/dashboard/clients/s.{traffic.free.pk}/#refusals"
    assert body["top_scopes"] == [{"scope": "search", "denied": 5, "allowed": 15}]
    [upgrade] = body["upgrades"]
    assert (upgrade["name"], upgrade["upgrade_to"], upgrade["revenue_difference"]) == (
        traffic.free.name,
        "Pro",
        "49.000000",
    )
    assert [p["multiplier"] for p in body["adaptive"]["plans"]] == [1.0, 1.0, 1.0]


def test_filters_by_plan_and_scope(staff, traffic):
    pro = traffic.pro.plan
    body = staff.get("/dashboard/data.json", {"plan": pro.pk}).json()
    assert (body["totals"]["allowed"], body["totals"]["denied"]) == (5, 0)
    body = staff.get("/dashboard/data.json", {"scope": "nothing-here"}).json()
    assert body["totals"]["allowed"] == 0


def test_dashboard_query_count_does_not_grow_with_clients(staff, traffic, django_assert_max_num_queries, client):
    """Twelve more refused clients cost no extra query (no N+1)."""
    with django_assert_max_num_queries(MAX_QUERIES):
        assert staff.get("/dashboard/").status_code == 200
    for _ in range(12):
        key = issue_key(plan=traffic.free.plan)
        send(client, key, 12, "/api/demo/search?q=x")
    # The budget panel reads each recently used key's subscriber through the rules cache, as the throttle does:
    # a few queries per key after a rules change (dashboard.budgets.KEYS_READ keys at most), none after. The
    # poller's look at the rules version, now rather than at a moment of its thread's, sees the keys' issue.
    default_engine.runtime().tick()
    staff.get("/dashboard/data.json")
    with django_assert_max_num_queries(MAX_QUERIES):
        assert staff.get("/dashboard/").status_code == 200
    with django_assert_max_num_queries(MAX_QUERIES):
        body = staff.get("/dashboard/data.json").json()
    assert len(body["top_clients"]) == 10


def test_client_detail_shows_plan_limits_usage_bans_and_acl(staff, traffic):
    sub = traffic.free
    ACLEntry.objects.create(action="deny", subscription=sub, reason="abuse report 42")
    page = staff.get(f"/dashboard/clients/s.{sub.pk}/").content.decode()
    assert sub.name in page
    assert "Free" in page
    assert 'data-limit="search"' in page
    assert "abuse report 42" in page
    assert "Never banned." in page
    assert "Pro" in page  # the upgrade offer: its search limit is used up


def every_refusal_kind_yesterday(sub) -> None:
    """A flushed row of yesterday for ``sub``: 7 allowed; refused 1 by rate, 1 by budget, 2 by the access list,
    4 for capacity, 3 while banned; 6 a shadow limit would have refused."""
    UsageRecord.objects.create(
        client=f"s.{sub.pk}", subscription=sub, plan=sub.plan, plan_key=sub.plan_id, scope="search",
        day=usage_date(timezone.now()) - timedelta(days=1), allowed=7, denied_rate=1, denied_budget=1, denied_acl=2,
        denied_capacity=4, denied_banned=3, shadow_would_deny=6, observed_at=timezone.now(),
    )  # fmt: skip


def test_client_detail_shows_each_days_refusals_by_reason(staff, traffic):
    """Recent usage: one row a day with its refusals by reason (none blank) adding up to its Denied: today's 5
    rate refusals made by the real throttle, and yesterday's row of every kind."""
    every_refusal_kind_yesterday(traffic.free)
    page = staff.get(f"/dashboard/clients/s.{traffic.free.pk}/").content.decode()
    table = page[page.index('id="recent-usage"') : page.index("</table>", page.index('id="recent-usage"'))]
    head = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th>(.*?)</th>", table)]
    cells = [re.findall(r"<td>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]
    rows = [dict(zip(head, (re.sub(r"<[^>]+>", "", c).strip() for c in row), strict=True)) for row in cells]
    shown = ["Allowed", "Denied", "Rate", "Budget", "ACL", "Capacity", "Banned", "Shadow"]
    yesterday, today = rows  # oldest first
    assert [today[k] for k in shown] == ["10", "5", "5", "0", "0", "0", "0", "0"]
    assert [yesterday[k] for k in shown] == ["7", "11", "1", "1", "2", "4", "3", "6"]


def test_the_headline_cards_add_up(staff, traffic):
    """Denied is the sum of a card per refusal kind (rate, budget, ACL, capacity, banned); shadow's "would deny"
    are admitted requests, outside Denied. In the page and in its feed."""
    every_refusal_kind_yesterday(traffic.free)
    page = staff.get("/dashboard/").content.decode()
    cards = dict(re.findall(r'<span class="figure" id="total-([a-z]+)">(\d+)</span>', page))
    kinds = ["rate", "budget", "acl", "capacity", "banned"]
    assert [cards[k] for k in ["denied", *kinds, "shadow"]] == ["16", "6", "1", "2", "4", "3", "6"]
    assert int(cards["denied"]) == sum(int(cards[k]) for k in kinds)
    totals = staff.get("/dashboard/data.json").json()["totals"]
    assert totals["denied"] == sum(totals[k] for k in kinds) == 16


def test_client_usage_page_from_an_api_key(client, traffic):
    """A key posted to /usage/ leads to a signed page with the plan, remaining quota and an upgrade prompt."""
    response = client.post("/usage/", {"api_key": demo_key("free")})
    assert response.status_code == 302
    page = client.get(response["Location"])
    text = page.content.decode()
    assert page.status_code == 200
    assert '<strong id="plan">Free</strong>' in text
    assert re.search(r'data-limit="search">0<', text)
    assert 'id="upgrade"' in text
    assert "<strong>Pro</strong>" in text
    assert "usage-chart" in text


def test_client_usage_page_refuses_bad_keys_and_revoked_keys(client, traffic):
    assert "unknown, revoked or expired" in client.post("/usage/", {"api_key": "qk_nope"}).content.decode()
    assert client.get("/usage/me/").status_code == 403  # never signed in
    assert client.post("/usage/", {"api_key": demo_key("pro")})["Location"] == "/usage/me/"
    assert client.get("/usage/me/").status_code == 200
    key = APIKey.objects.get(pk=client.session["quota_usage_sign_in"]["key"])
    key.revoke()
    assert client.get("/usage/me/").status_code == 403
    assert subscription_of(demo_key("free"))  # the other keys still work


def test_revoking_a_key_ends_its_sign_ins_for_good(client, traffic):
    """A revoked key cannot be brought back (its sign-ins would come back with it): the admin says so."""
    client.post("/usage/", {"api_key": demo_key("pro")})
    key = APIKey.objects.get(pk=client.session["quota_usage_sign_in"]["key"])
    key.revoke()
    key.revoked_at = None
    with pytest.raises(ValidationError) as refused:
        key.full_clean()
    assert "stays revoked" in str(refused.value)
    assert client.get("/usage/me/").status_code == 403


def test_no_token_appears_in_any_url_and_the_session_is_cycled(client, traffic):
    """The key is posted; the page's address is the same for everyone (nothing to leak into access logs)."""
    client.get("/usage/")
    before = client.session.session_key
    response = client.post("/usage/", {"api_key": demo_key("free")})
    assert response["Location"] == "/usage/me/"
    assert client.session.session_key != before
    assert demo_key("free") not in str(dict(client.session))


def test_a_sign_in_cannot_be_forged_from_a_key_id_alone(client, traffic):
    """Even with SECRET_KEY, a sign-in needs a secret of the key that never leaves the database."""
    client.post("/usage/", {"api_key": demo_key("free")})
    signed = client.session["quota_usage_sign_in"]
    for forged in ({**signed, "secret": "0" * 32}, {**signed, "key": signed["key"] + 1}, {"key": signed["key"]}, "x"):
        session = client.session
        session["quota_usage_sign_in"] = forged
        session.save()
        assert client.get("/usage/me/").status_code == 403, forged


def test_a_sign_in_ends_after_its_maximum_age(client, traffic):
    client.post("/usage/", {"api_key": demo_key("free")})
    session = client.session
    session["quota_usage_sign_in"] = {**session["quota_usage_sign_in"], "at": time.time() - 13 * 3600}
    session.save()
    assert client.get("/usage/me/").status_code == 403


def test_signing_out_ends_the_sign_in(client, traffic):
    client.post("/usage/", {"api_key": demo_key("free")})
    assert client.post("/usage/sign-out/").status_code == 302
    assert client.get("/usage/me/").status_code == 403


def test_45_wrong_keys_on_the_form_from_one_address_are_slowed_down(client, traffic):
    """The form looks keys up like the API: failures count against the address (30 per 10 minutes by default),
    then the form answers 429 with Retry-After, and so does the API for that address's unknown keys."""
    codes = [client.post("/usage/", {"api_key": f"qk_guess_{n}"}, REMOTE_ADDR="192.0.2.77").status_code
             for n in range(45)]  # fmt: skip
    assert codes == [200] * 30 + [429] * 15
    refused = client.post("/usage/", {"api_key": "qk_guess_x"}, REMOTE_ADDR="192.0.2.77")
    assert 1 <= int(refused["Retry-After"]) <= 600
    assert "Too many attempts" in refused.content.decode()
    api = client.get("/api/demo/ping", HTTP_X_API_KEY="qk_guess_y", REMOTE_ADDR="192.0.2.77")
    assert api.status_code == 429
    # A valid key is still answered from that address.
    assert client.post("/usage/", {"api_key": demo_key("free")}, REMOTE_ADDR="192.0.2.77").status_code == 302


def test_the_usage_page_is_rate_limited_per_address(client, traffic, quota_clock):
    client.post("/usage/", {"api_key": demo_key("free")}, REMOTE_ADDR="192.0.2.78")
    codes = Counter(client.get("/usage/me/", REMOTE_ADDR="192.0.2.78").status_code for _ in range(65))
    assert codes[200] == 59  # the sign-in was the first of 60 per minute
    assert codes[429] == 6
    refused = client.get("/usage/me/", REMOTE_ADDR="192.0.2.78")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1


def test_vendored_chart_js_is_the_version_locked_by_npm():
    """dashboard/static holds the Chart.js of package-lock.json (copied by `make vendor`), served locally."""
    lock = json.loads((BASE_DIR / "package-lock.json").read_text())
    version = lock["packages"]["node_modules/chart.js"]["version"]
    head = (BASE_DIR / "dashboard/static/dashboard/vendor/chart.umd.min.js").read_text()[:200]
    assert f"Chart.js v{version}" in head


ODD = ["", "0", "-1", "²", "٣", "99999999999999999999", "\x00", "x" * 5000, "*", "%00", "ümlaut"]


@pytest.mark.parametrize("path", ["/dashboard/", "/dashboard/data.json"])
def test_no_filter_value_gives_a_server_error(staff, traffic, path):
    """Whatever plan, scope and days hold, the dashboard answers (bad values are ignored), never a 5xx."""
    for name in ("plan", "scope", "days"):
        for value in ODD:
            response = staff.get(path, {name: value})
            assert response.status_code == 200, (name, value)


@pytest.mark.parametrize("client_tag", ["s.999999", "\x00", "x" * 500, "ip.::1", "s.1/../../etc"])
def test_odd_client_pages_are_404_or_200_never_500(staff, traffic, client_tag):
    from urllib.parse import quote

    assert staff.get(f"/dashboard/clients/{quote(client_tag)}/").status_code in (200, 404)


def test_staff_without_view_all_usage_get_403_on_every_dashboard_page(traffic):
    """Every tenant's usage is behind quota_usage.view_all_usage, not merely is_staff."""
    support = DjangoClient()
    support.force_login(UserFactory(username="support", is_staff=True))
    for path in ("/dashboard/", "/dashboard/data.json", "/dashboard/clients/s.1/"):
        response = support.get(path)
        assert response.status_code == 403, path
        assert b"Pro" not in response.content
    allowed = UserFactory(username="analyst", is_staff=True)
    allowed.user_permissions.add(Permission.objects.get(codename="view_all_usage"))
    support.force_login(allowed)
    assert support.get("/dashboard/data.json").status_code == 200
