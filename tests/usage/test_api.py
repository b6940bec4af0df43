"""The usage-report API: who sees what, live counts, validation, CSV, the standing, the schema."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, timedelta

import pytest

from plans.models import APIKey
from quotas.identity.clients import hash_api_key
from tests.factories import SubscriptionFactory, UserFactory, issue_key
from usage.flush import flush_usage
from usage.models import UsageRecord

from .conftest import send

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

REPORT = "/api/v1/usage/"
CURRENT = "/api/v1/usage/current"


def tag_of(raw_key: str) -> str:
    return f"s.{APIKey.objects.get(key_hash=hash_api_key(raw_key)).subscription_id}"


def report(api, key=None, **params):
    extra = {"HTTP_X_API_KEY": key} if key is not None else {}
    return api.get(REPORT, params, **extra)


def problem(response, status):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = json.loads(response.content)
    assert body["status"] == status
    assert body["type"]
    assert body["title"]
    assert body["detail"]
    return body


@pytest.fixture
def today(redis_client) -> date:
    seconds, _ = redis_client.time()
    return date.fromtimestamp(0) + timedelta(seconds=seconds)


def test_staff_without_view_all_usage_see_only_their_own(api, two_clients):
    """Being staff is not enough to read other tenants' usage: the permission is."""
    mine, _ = two_clients
    support = UserFactory(username="support", is_staff=True)
    api.force_authenticate(support)
    body = report(api).json()
    assert body["client"] == f"u.{support.pk}"
    assert body["totals"]["allowed"] == 0
    problem(report(api, client=tag_of(mine)), 403)


@pytest.fixture
def two_clients(api, free, pro):
    """Two API-key clients with traffic: mine on free (5 ok, 1 refused), theirs on pro (4 ok)."""
    mine, theirs = issue_key(plan=free), issue_key(plan=pro)
    assert send(api, mine, 6) == {200: 5, 429: 1}
    assert send(api, theirs, 4) == {200: 4}
    return mine, theirs


def test_a_key_sees_its_own_live_usage_before_any_flush(api, two_clients, today):
    """Today's counts come straight from Redis; the other client's are not there."""
    mine, _ = two_clients
    response = report(api, mine)
    assert response.status_code == 200
    body = response.json()
    assert body["client"] == tag_of(mine)
    assert body["group_by"] == "day"
    assert body["live"] is True
    assert body["to"] == str(today)
    assert body["from"] == str(today - timedelta(days=29))
    assert [r["day"] for r in body["rows"]] == [str(today)]
    assert body["totals"]["allowed"] == 5
    assert body["totals"]["weight"] == 5
    assert body["totals"]["cost"] == "0.000000"
    assert (body["totals"]["denied"], body["totals"]["total"], body["totals"]["shadow_would_deny"]) == (1, 6, 0)
    assert body["totals"]["denied_by"] == {
        "rate": 1, "budget": 0, "acl": 0, "capacity": 0, "banned": 0, "local": None,
    }  # fmt: skip


def test_flushed_and_live_counts_are_not_added_twice(api, two_clients, redis_client):
    """After a flush the report is the same: database rows and Redis are merged, not summed."""
    mine, theirs = two_clients
    before = report(api, mine).json()
    assert before["totals"]["denied_by"]["rate"] == 1
    flush_usage()
    assert UsageRecord.objects.count() == 2
    assert report(api, mine).json() == before
    send(api, theirs, 1)  # after the flush: counted once, from Redis
    assert report(api, theirs).json()["totals"]["allowed"] == 5


def test_old_days_come_from_the_database(api, two_clients, redis_client, today):
    """Days Redis no longer holds are reported from flushed rows; group_by=scope sums them."""
    mine, _ = two_clients
    flush_usage()
    UsageRecord.objects.filter(client=tag_of(mine)).update(day=today - timedelta(days=10))
    redis_client.flushall()  # as if the hashes had expired

    by_day = report(api, mine, **{"from": str(today - timedelta(days=20))}).json()
    by_scope = report(api, mine, group_by="scope").json()

    assert [(r["day"], r["allowed"]) for r in by_day["rows"]] == [(str(today - timedelta(days=10)), 5)]
    assert by_scope["rows"] == [{"scope": None, **by_day["totals"]}]


def test_a_key_can_never_read_another_clients_usage(api, two_clients):
    """Asking for the other client by tag (with or without braces) or guessed ids is refused."""
    mine, theirs = two_clients
    for guess in (tag_of(theirs), "{" + tag_of(theirs) + "}", "s.999", "ip.127.0.0.1", "u.1"):
        problem(report(api, mine, client=guess), 403)
    assert report(api, mine, client=tag_of(mine)).json()["totals"]["allowed"] == 5
    assert report(api, theirs).json()["totals"]["allowed"] == 4


def test_anonymous_and_bad_keys_get_401_problems(api, two_clients):
    """No credentials, or an unknown key: 401 problem+json with WWW-Authenticate; nothing leaks."""
    for response in (report(api), report(api, client="s.1"), api.get(CURRENT)):
        body = problem(response, 401)
        assert "X-API-Key" in response["WWW-Authenticate"]
        assert "rows" not in body
    body = problem(report(api, "qk_not-a-key"), 401)
    assert body["reason"] == "api_key_unknown"


def test_a_signed_in_user_without_staff_rights_sees_only_its_own(api, free, two_clients):
    """A user with a subscription sees that subscription's usage; other clients are refused."""
    user = UserFactory(username="customer")
    sub = SubscriptionFactory(plan=free, user=user)
    api.force_authenticate(user)
    body = report(api).json()
    assert body["client"] == f"s.{sub.pk}"
    assert body["rows"] == []
    problem(report(api, client=tag_of(two_clients[1])), 403)


def test_staff_see_every_client_and_filter_by_client_and_plan(api, staff, two_clients, free):
    """Staff see the sum over clients, or one client, or one plan."""
    mine, theirs = two_clients
    assert report(api).json()["totals"]["allowed"] == 9
    one = report(api, client=tag_of(theirs)).json()
    assert one["client"] == tag_of(theirs)
    assert one["totals"]["allowed"] == 4
    on_free = report(api, plan="free").json()
    assert on_free["plan"] == "free"
    assert on_free["totals"]["allowed"] == 5
    assert report(api, client=tag_of(mine), plan="pro").json()["rows"] == []


def test_a_staff_user_calling_with_an_api_key_is_that_client(api, staff, two_clients):
    """The key decides: staff rights do not widen what a key may read."""
    mine, theirs = two_clients
    assert report(api, mine).json()["client"] == tag_of(mine)
    problem(report(api, mine, client=tag_of(theirs)), 403)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "2025-13-01"}, "from"),
        ({"to": "yesterday"}, "to"),
        ({"from": "2025-03-02", "to": "2025-03-01"}, "from"),
        ({"from": "2024-01-01", "to": "2025-01-01"}, "to"),  # 367 days
        ({"group_by": "week"}, "group_by"),
        ({"plan": "platinum"}, "plan"),
        ({"client": "s.1}:x"}, "client"),
        ({"to": "0001-01-05"}, "to"),
        ({"to": "0001-01-05", "format": "csv"}, "to"),
        ({"from": "0001-01-01", "to": "0001-01-05"}, "from"),
        ({"to": "9999-12-31"}, "to"),
    ],
)
def test_bad_parameters_are_400_problems_naming_the_field(api, staff, free, params, field):
    body = problem(report(api, **params), 400)
    assert list(body["errors"]) == [field]
    assert field in body["detail"]


ODD_VALUES = ["", " ", "0", "-1", "0001-01-01", "9999-12-31", "1969-12-31", "2025-02-30", "%00", "\u0000", "x" * 5000,
              "s.1\n", "{s.1}", "ümlaut", "1e308", "[]", "null"]  # fmt: skip


@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.parametrize("name", ["from", "to", "group_by", "client", "plan", "format"])
def test_no_parameter_value_gives_a_server_error(api, staff, two_clients, name, fmt):
    """Whatever a parameter holds, the answer is a 2xx or a 4xx problem, never a 5xx."""
    for value in ODD_VALUES:
        params = {"format": fmt, name: value}
        response = report(api, **params)
        assert response.status_code < 500, (params, response.content[:300])
        if response.status_code >= 400 and name != "format":
            assert response["Content-Type"] == "application/problem+json", (params, response.content[:300])


def test_a_full_year_is_accepted(api, staff):
    """366 days is the longest range."""
    assert report(api, **{"from": "2024-01-01", "to": "2024-12-31"}).status_code == 200


def test_csv_for_spreadsheets(api, two_clients, today):
    """?format=csv: text/csv with a header line and one line per row, as an attachment."""
    mine, _ = two_clients
    response = report(api, mine, format="csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="usage-')
    lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert lines[0] == [
        "day", "allowed", "denied", "denied_by_rate", "denied_by_budget", "denied_by_acl", "denied_by_capacity",
        "denied_by_banned", "denied_by_local", "shadow_would_deny", "total", "denial_rate", "weight", "cost",
    ]  # fmt: skip
    assert lines[1] == [str(today), "5", "1", "1", "0", "0", "0", "0", "", "0", "6", "0.166667", "5", "0.000000"]
    assert len(lines) == 2


def test_csv_errors_are_still_problem_json(api, two_clients):
    problem(report(api, two_clients[0], format="csv", group_by="x"), 400)


def test_the_current_standing_of_a_key(api, two_clients):
    """/current: the caller's plan and what is left of its limits, consuming nothing."""
    mine, _ = two_clients
    first = api.get(CURRENT, HTTP_X_API_KEY=mine)
    assert first.status_code == 200
    body = first.json()
    assert body["client"] == tag_of(mine)
    assert body["plan"]["slug"] == "free"
    assert {(limit["name"], limit["remaining"]) for limit in body["limits"]} == {("global", 0), ("search", 2)}
    assert api.get(CURRENT, HTTP_X_API_KEY=mine).json()["limits"] == body["limits"]


def test_the_usage_api_is_not_counted_as_usage(api, two_clients):
    """Reading usage neither spends quota nor appears in the report."""
    mine, _ = two_clients
    for _ in range(3):
        assert report(api, mine).status_code == 200
        assert api.get(CURRENT, HTTP_X_API_KEY=mine).status_code == 200
    assert report(api, mine).json()["totals"]["allowed"] == 5


def test_the_schema_documents_the_usage_api(api):
    """/api/schema/ lists both paths with their parameters."""
    schema = api.get("/api/schema/", {"format": "json"}).json()
    report_get = schema["paths"]["/api/v1/usage/"]["get"]
    assert {p["name"] for p in report_get["parameters"]} >= {"from", "to", "group_by", "client", "plan", "format"}
    assert {"200", "400", "401", "403"} <= set(report_get["responses"])
    assert "text/csv" in report_get["responses"]["200"]["content"]
    assert "/api/v1/usage/current" in schema["paths"]


def test_a_user_no_plan_covers_sees_drfs_rates_with_what_is_left(api, settings):
    """With no plan, QuotaThrottle limits a user by DRF's DEFAULT_THROTTLE_RATES: /current lists those limits
    (the user rate, and a throttle_scope's rate under its scope; never the anonymous rate) with what is left."""
    rates = {"user": "5/min", "anon": "2/min", "scoped": "7/hour"}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    api.force_authenticate(UserFactory(username="no-plan"))
    assert send(api, None, 3) == {200: 3}
    assert send(api, None, 1, "/t/scoped") == {200: 1}  # the user rate and the scope's, in one decision
    body = api.get(CURRENT).json()
    assert body["plan"] is None
    limits = {(lim["name"], lim["scope"], lim["quota"], lim["window"], lim["remaining"]) for lim in body["limits"]}
    assert limits == {("user", None, 5, 60, 1), ("scoped", "scoped", 7, 3600, 6)}
    assert api.get(CURRENT).json()["limits"] == body["limits"]  # reading it spends nothing
