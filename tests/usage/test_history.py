"""The usage API's history (group_by=minute|hour) for operators: counted from real requests, per plan and scope.

A client's own history (the same parameters with its API key) is in test_client_history.py.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest

from quotas.engine import default_engine
from tests.factories import issue_key

from .conftest import send
from .test_api import problem, report, tag_of

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


@pytest.fixture
def traffic(api, free, pro):
    """Two clients' requests, written by the poller's tick: mine on free (5 ok, 2 refused), theirs on pro (3 ok)."""
    mine, theirs = issue_key(plan=free), issue_key(plan=pro)
    assert send(api, mine, 7) == {200: 5, 429: 2}
    assert send(api, theirs, 3) == {200: 3}
    default_engine.runtime().tick()
    return mine, theirs


def per_plan(rows: list[dict]) -> dict[str, dict]:
    """The rows summed per plan (the requests may straddle a minute)."""
    sums: dict[str, dict] = {}
    for row in rows:
        into = sums.setdefault(row["plan"], dict.fromkeys(("allowed", "denied_rate", "denied", "total"), 0))
        for name in ("allowed", "denied", "total"):
            into[name] += row[name]
        # A refusal is decided by Redis (rate) or, once refused, from the process's memory (local).
        into["denied_rate"] += row["denied_by"]["rate"] + row["denied_by"]["local"]
    return sums


@pytest.mark.parametrize("group_by", ["minute", "hour"])
def test_operators_see_each_plan_per_minute_and_hour(api, staff, traffic, group_by):
    """Buckets per plan and scope with every counter, denied, total and denial rate; the top clients."""
    mine, theirs = traffic
    body = report(api, group_by=group_by).json()
    assert body["group_by"] == group_by
    assert len(body["rows"]) <= 4  # two plans, in at most two minutes or hours
    row = body["rows"][0]
    assert row["start"].endswith("Z")
    assert row["scope"] is None  # the ping view has no quota_scope
    assert set(row) == {
        "start", "plan", "scope", "allowed", "denied", "denied_by", "shadow_would_deny", "total", "denial_rate",
        "weight", "cost",
    }  # fmt: skip
    assert set(row["denied_by"]) == {"rate", "budget", "acl", "capacity", "banned", "local"}
    assert (row["weight"], row["cost"]) == (None, None)  # the daily usage's only
    sums = per_plan(body["rows"])
    assert sums["free"] == {"allowed": 5, "denied_rate": 2, "denied": 2, "total": 7}
    assert sums["pro"] == {"allowed": 3, "denied_rate": 0, "denied": 0, "total": 3}
    if len(body["rows"]) == 2:
        free = next(r for r in body["rows"] if r["plan"] == "free")
        assert free["denial_rate"] == round(2 / 7, 6)
    assert body["top_clients"]["allowed"] == [
        {"client": tag_of(mine), "requests": 5},
        {"client": tag_of(theirs), "requests": 3},
    ]
    assert body["top_clients"]["denied"] == [{"client": tag_of(mine), "requests": 2}]
    only_pro = report(api, group_by=group_by, plan="pro").json()["rows"]
    assert {r["plan"] for r in only_pro} == {"pro"}


def test_nothing_is_written_before_the_tick(api, staff, free, set_quotas, redis_client):
    """Requests only note their history in the process; the poller's tick writes it (no Redis call per request)."""
    set_quotas(RULES_CHECK_INTERVAL=0)  # no poller thread: this test ticks by hand
    default_engine.reset()
    send(api, issue_key(plan=free), 2)
    assert default_engine.runtime().history.pending() == 2
    assert redis_client.keys("*:hist:*") == []
    assert report(api, group_by="minute").json()["rows"] == []
    default_engine.runtime().tick()
    assert per_plan(report(api, group_by="minute").json()["rows"])["free"]["allowed"] == 2


def test_history_as_csv(api, staff, traffic):
    """?format=csv: a header line, then one line per bucket."""
    response = report(api, group_by="hour", format="csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="history-')
    header, *lines = list(csv.reader(io.StringIO(response.content.decode())))
    assert header[:4] == ["start", "plan", "scope", "allowed"]
    assert header[3:] == [
        "allowed", "denied", "denied_by_rate", "denied_by_budget", "denied_by_acl", "denied_by_capacity",
        "denied_by_banned", "denied_by_local", "shadow_would_deny", "total", "denial_rate", "weight", "cost",
    ]  # fmt: skip
    assert sum(int(line[header.index("total")]) for line in lines) == 10


def ago(**delta: float) -> str:
    return iso(datetime.now(UTC) - timedelta(**delta))


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group_by": "week"}, "group_by"),
        ({"group_by": "minute", "start": ago(hours=3)}, "start"),
        ({"group_by": "hour", "start": ago(days=8)}, "start"),
        ({"group_by": "minute", "start": ago(minutes=5), "end": ago(minutes=10)}, "start"),
        ({"group_by": "minute", "start": "yesterday"}, "start"),
        ({"group_by": "hour", "end": "2026-13-01T00:00:00Z"}, "end"),
        ({"group_by": "hour", "top": "101"}, "top"),
        ({"group_by": "hour", "client": "ip.127.0.0.1"}, "client"),
        ({"group_by": "minute", "start": ago(hours=3), "format": "csv"}, "start"),
    ],
)
def test_bad_history_parameters_are_400_problems_naming_them(api, staff, params, field):
    body = problem(report(api, **params), 400)
    assert list(body["errors"]) == [field]
    assert field in body["detail"]


def test_the_whole_kept_range_is_accepted(api, staff):
    """2 hours of minutes and 7 days of hours (each 168 hashes read in one pipeline)."""
    assert report(api, group_by="minute", start=ago(hours=2)).status_code == 200
    assert report(api, group_by="hour", start=ago(days=7)).status_code == 200


def test_staff_read_one_clients_minutes_as_that_client_reads_them(api, staff, traffic):
    """?group_by=minute&client=s.N: the subscription's own history, the shape its key gets; a client with no
    history of its own (an address) is a 400 naming why."""
    mine, _ = traffic
    body = report(api, group_by="minute", client=tag_of(mine)).json()
    assert set(body) == {"group_by", "start", "end", "client", "rows"}
    assert body["client"] == tag_of(mine)
    assert (sum(r["allowed"] for r in body["rows"]), sum(r["denied"] for r in body["rows"])) == (5, 2)
    assert body["rows"] == report(api, mine, group_by="minute").json()["rows"]
    refused = problem(report(api, group_by="hour", client="ip.127.0.0.1"), 400)
    assert "kept per subscription" in refused["errors"]["client"]
