"""The usage API's history for a client (group_by=minute|hour with its API key): its own requests admitted and
refused per minute or hour, from the per-subscriber history the engine's tick writes, for the last 24 hours."""

from __future__ import annotations

import csv
import io
import time
from datetime import UTC, datetime

import pytest

from quotas.engine import default_engine
from tests.factories import SubscriptionFactory, UserFactory, issue_key

from .conftest import send
from .test_api import ODD_VALUES, problem, report, tag_of
from .test_history import ago

#: The traffic's 7 requests in a client's own history, as every usage row holds counts (usage.rows): its own
#: history keeps totals only, so no reasons, no shadow count, no weight or cost.
OWN_COUNTS = {
    "allowed": 5, "denied": 2, "denied_by": None, "shadow_would_deny": None, "total": 7,
    "denial_rate": round(2 / 7, 6), "weight": None, "cost": None,
}  # fmt: skip

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def bucket_of(at: float, seconds: int) -> str:
    """The ISO start (UTC, ...Z) of the minute (60) or hour (3600) holding epoch ``at``."""
    return datetime.fromtimestamp(at // seconds * seconds, UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def traffic(api, free, pro, quota_clock):
    """Two clients' requests inside one minute, written by the poller's tick: mine on free (5 ok, 2 refused),
    theirs on pro (3 ok). Returns both keys and when they were sent (epoch seconds)."""
    # The engine's clock stands still (quota_clock): every request in one minute, one bucket holds them all.
    mine, theirs = issue_key(plan=free), issue_key(plan=pro)
    assert send(api, mine, 7) == {200: 5, 429: 2}
    assert send(api, theirs, 3) == {200: 3}
    sent_at = quota_clock.now()
    default_engine.runtime().tick()
    return mine, theirs, sent_at


def test_a_client_reads_its_requests_in_the_minute_it_made_them(api, traffic):
    """One row, the minute of the requests: 5 admitted, 2 refused; the range is the last 24 hours, in UTC."""
    mine, _, sent_at = traffic
    response = report(api, mine, group_by="minute")
    assert response.status_code == 200
    body = response.json()
    assert body["group_by"] == "minute"
    assert body["client"] == tag_of(mine)
    assert body["rows"] == [{"start": bucket_of(sent_at, 60), **OWN_COUNTS}]
    start, end = (datetime.fromisoformat(body[name].replace("Z", "+00:00")) for name in ("start", "end"))
    assert body["start"].endswith("Z")
    assert body["end"].endswith("Z")
    assert abs((end - start).total_seconds() - 24 * 3600) <= 1
    assert abs(end.timestamp() - time.time()) < 60
    assert set(body) == {"group_by", "start", "end", "client", "rows"}


def test_per_hour_and_within_a_range(api, traffic):
    """group_by=hour sums the hour; start and end narrow the range; reading the history is not counted in it."""
    mine, _, sent_at = traffic
    hour = report(api, mine, group_by="hour").json()["rows"]
    assert hour == [{"start": bucket_of(sent_at, 3600), **OWN_COUNTS}]
    default_engine.runtime().tick()  # anything the reads above noted would be written now
    recent = report(api, mine, group_by="minute", start=ago(minutes=3), end=ago(seconds=0)).json()
    assert [(r["allowed"], r["denied"]) for r in recent["rows"]] == [(5, 2)]
    older = report(api, mine, group_by="minute", start=ago(hours=20), end=ago(hours=19)).json()
    assert older["rows"] == []


def test_a_client_never_sees_another_clients_history(api, traffic):
    """Each key reads its own counts only; naming the other client (any spelling) is a 403, its own tag is fine."""
    mine, theirs, _ = traffic
    assert [(r["allowed"], r["denied"]) for r in report(api, theirs, group_by="minute").json()["rows"]] == [(3, 0)]
    assert report(api, theirs, group_by="hour").json()["client"] == tag_of(theirs)
    for guess in (tag_of(theirs), "{" + tag_of(theirs) + "}", "s.999", "u.1", "ip.127.0.0.1"):
        body = problem(report(api, mine, group_by="minute", client=guess), 403)
        assert "rows" not in body
    own = report(api, mine, group_by="minute", client="{" + tag_of(mine) + "}").json()
    assert [(r["allowed"], r["denied"]) for r in own["rows"]] == [(5, 2)]


@pytest.mark.parametrize("group_by", ["minute", "hour"])
def test_a_range_beyond_the_24_hours_kept_is_a_400_naming_the_limit(api, traffic, group_by):
    """A start (or an end) earlier than the history keeps: a 400 problem whose message names the 24 hours."""
    mine, _, _ = traffic
    body = problem(report(api, mine, group_by=group_by, start=ago(hours=26)), 400)
    assert list(body["errors"]) == ["start"]
    assert f"Your own group_by={group_by} history is kept for 24 hours: give a start after " in body["errors"]["start"]
    assert "start" in body["detail"]
    body = problem(report(api, mine, group_by=group_by, end=ago(hours=30)), 400)
    assert list(body["errors"]) == ["end"]
    assert "kept for 24 hours" in body["errors"]["end"]
    assert report(api, mine, group_by=group_by, start=ago(hours=24)).status_code == 200


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group_by": "minute", "plan": "free"}, "plan"),
        ({"group_by": "hour", "top": "5"}, "top"),
        ({"group_by": "minute", "start": ago(minutes=5), "end": ago(minutes=10)}, "start"),
        ({"group_by": "minute", "start": "yesterday"}, "start"),
        ({"group_by": "hour", "end": "2026-13-01T00:00:00Z"}, "end"),
        ({"group_by": "minute", "client": "s.1}:x"}, "client"),
        ({"group_by": "minute", "start": ago(hours=26), "format": "csv"}, "start"),
    ],
)
def test_bad_parameters_are_400_problems_naming_them(api, free, params, field):
    body = problem(report(api, issue_key(plan=free), **params), 400)
    assert list(body["errors"]) == [field]
    assert field in body["detail"]


@pytest.mark.parametrize("name", ["start", "end", "client", "format"])
def test_no_parameter_value_gives_a_server_error(api, free, name):
    """Whatever a parameter holds, a client's history answers a 2xx or a 4xx problem, never a 5xx."""
    key = issue_key(plan=free)
    for value in ODD_VALUES:
        params = {"group_by": "minute", name: value}
        response = report(api, key, **params)
        assert response.status_code < 500, (params, response.content[:300])
        if response.status_code >= 400 and name != "format":
            assert response["Content-Type"] == "application/problem+json", (params, response.content[:300])


def test_a_client_history_as_csv(api, traffic):
    """?format=csv: a header line, then one line per minute with any request."""
    mine, _, sent_at = traffic
    response = report(api, mine, group_by="minute", format="csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="history-')
    lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert lines == [
        ["start", "allowed", "denied", "denied_by_rate", "denied_by_budget", "denied_by_acl", "denied_by_capacity",
         "denied_by_banned", "denied_by_local", "shadow_would_deny", "total", "denial_rate", "weight", "cost"],
        [bucket_of(sent_at, 60), "5", "2", "", "", "", "", "", "", "", "7", str(round(2 / 7, 6)), "", ""],
    ]  # fmt: skip


def test_a_staff_user_calling_with_an_api_key_reads_that_clients_history(api, staff, traffic):
    """The key decides: an operator's rights do not widen what a key reads, nor change its shape."""
    mine, theirs, _ = traffic
    body = report(api, mine, group_by="minute").json()
    assert body["client"] == tag_of(mine)
    assert [(r["allowed"], r["denied"]) for r in body["rows"]] == [(5, 2)]
    problem(report(api, mine, group_by="minute", client=tag_of(theirs)), 403)


def test_a_signed_in_user_reads_its_subscriptions_history(api, free, traffic):
    """A user with a subscription reads that subscription's history (nothing sent yet: no rows)."""
    user = UserFactory(username="customer")
    sub = SubscriptionFactory(plan=free, user=user)
    api.force_authenticate(user)
    body = report(api, group_by="hour").json()
    assert (body["client"], body["rows"]) == (f"s.{sub.pk}", [])


def test_callers_without_a_subscription_get_a_400_naming_group_by(api, traffic):
    """A user without a subscription (staff without quota_usage.view_all_usage included) has no history of its own."""
    api.force_authenticate(UserFactory(username="support", is_staff=True))
    for group_by in ("minute", "hour"):
        body = problem(report(api, group_by=group_by), 400)
        assert list(body["errors"]) == ["group_by"]
        assert "per subscription" in body["errors"]["group_by"]


def test_without_redis_a_clients_history_is_a_503(api, free, redis_server):
    """Redis unreachable: a 503 problem, as for the operators' history."""
    mine = issue_key(plan=free)
    redis_server.stop()
    try:
        response = report(api, mine, group_by="minute")
    finally:
        redis_server.start()
    problem(response, 503)


def test_the_schema_documents_a_clients_history(api):
    """/api/schema/: group_by offers minute and hour, and says a client gets its own history for 24 hours."""
    schema = api.get("/api/schema/", {"format": "json"}).json()
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/usage/"]["get"]["parameters"]}
    group_by = parameters["group_by"]
    assert {"minute", "hour"} <= set(group_by["schema"]["enum"])
    assert "A client with a subscription: its own" in group_by["description"]
    assert "24 hours" in group_by["description"]
