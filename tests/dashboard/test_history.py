"""The dashboard's range charts (dashboard/history.py): real history written to the test Redis, read back per
minute, hour or day, with denial rates per plan and scope and the alert threshold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from config.embedded_redis import free_port
from dashboard.history import RANGES, RATE_LINES, alert_from, build, charts, history_cells, range_from
from dashboard.queries import Filters, UsageSlice
from quotas.engine import default_engine
from quotas.observability.history import History
from quotas.store.history_store import HistoryStore

pytestmark = pytest.mark.django_db
#: Inside a minute, far from its edges (now is fixed for the builders, so only Redis's TTLs see the clock).
NOW = datetime.fromtimestamp((datetime.now(UTC).timestamp() // 60) * 60 + 30, UTC)


def write(redis_client, notes: list[tuple[int, str, str | None, str, str, str]]) -> None:
    """Write (count, minutes ago, plan, scope, outcome, reason) notes as the engine's tick does."""
    history = History()
    for n, ago, plan, scope, outcome, reason in notes:
        at = (NOW - timedelta(minutes=ago)).timestamp()
        for _ in range(n):
            history.note(plan, scope, outcome, reason, "{s.1}", at=at)
    history.write(HistoryStore(redis_client, default_engine.runtime().prefix))


@pytest.fixture
def rules(demo, redis_client):
    return default_engine.runtime().rules.current()


def test_the_last_hour_has_one_point_a_minute_with_allowed_and_refused_by_reason(redis_client, rules):
    """60 minutes, the current one last; counts land in their minute; older notes are left out."""
    write(
        redis_client,
        [
            (6, 5, "free", "search", "allowed", "none"),
            (2, 5, "free", "search", "denied", "rate"),
            (1, 5, "free", "search", "denied", "local"),
            (4, 30, "pro", "", "allowed", "none"),
            (9, 90, "pro", "", "allowed", "none"),  # before the hour
        ],
    )
    labels, cells = history_cells("minute", RANGES["1h"][1], filters=Filters(), rules=rules, now=NOW)
    assert len(labels) == 60
    assert labels[-1] == NOW.replace(second=0).isoformat().replace("+00:00", "Z")
    body = build(labels, cells, 0.1)
    assert sum(body["allowed"]) == 10
    assert (body["allowed"][-6], body["allowed"][-31]) == (6, 4)
    # Refused from a process's memory ("local") is drawn as rate, as the headline cards count it.
    assert body["denied"]["rate"][-6] == 3
    assert set(body["denied"]) == {"rate", "budget", "acl", "capacity", "banned", "shadow"}
    plans = {line["name"]: line for line in body["rates"]["plans"]}
    assert plans["Free"]["rates"][-6] == round(3 / 9, 4)
    assert plans["Free"]["rates"][-1] is None  # nothing decided: no point, not a 0 % one
    assert plans["Pro"]["rates"][-31] == 0.0
    assert {line["name"] for line in body["rates"]["scopes"]} == {"search", "(none)"}
    assert body["alert"]["above"] == [
        {"kind": "plan", "name": "Free", "rate": 0.3333, "refused": 3, "requests": 9, "at": labels[-6]},
        {"kind": "scope", "name": "search", "rate": 0.3333, "refused": 3, "requests": 9, "at": labels[-6]},
    ]


def test_hours_honour_the_plan_and_scope_filters(redis_client, rules):
    """Per hour for 24 h and 7 d; only the filtered plan's (or scope's) buckets count."""
    write(
        redis_client,
        [
            (5, 0, "free", "search", "allowed", "none"),
            (3, 0, "free", "search", "denied", "budget"),
            (7, 0, "pro", "export", "allowed", "none"),
            (2, 0, "pro", "search", "denied", "rate"),
        ],
    )
    free = next(p for p in rules.plans.values() if p.slug == "free")
    for name, points in (("24h", 24), ("7d", 168)):
        labels, cells = history_cells("hour", RANGES[name][1], filters=Filters(), rules=rules, now=NOW)
        assert len(labels) == points
        assert build(labels, cells, 0.1)["allowed"][-1] == 12
    only_free = Filters(plan_id=free.id)
    body = build(*history_cells("hour", RANGES["24h"][1], filters=only_free, rules=rules, now=NOW), 0.1)
    assert (body["allowed"][-1], body["denied"]["budget"][-1], body["denied"]["rate"][-1]) == (5, 3, 0)
    only_search = Filters(scope="search")
    body = build(*history_cells("hour", RANGES["24h"][1], filters=only_search, rules=rules, now=NOW), 0.1)
    assert (body["allowed"][-1], body["denied"]["rate"][-1]) == (5, 2)
    none = Filters(plan_id=999_999)  # no such plan: nothing, not everything
    assert (
        build(*history_cells("hour", RANGES["24h"][1], filters=none, rules=rules, now=NOW), 0.1)["allowed"] == [0] * 24
    )


def test_the_rate_chart_keeps_the_busiest_lines_and_the_alert_table_sees_every_group():
    """RATE_LINES plans are drawn (the busiest); a small plan above the threshold is still listed."""
    cells = [(0, f"plan{n}", "", {"allowed": 100 * (n + 1)}) for n in range(RATE_LINES + 2)]
    cells.append((1, "tiny", "", {"allowed": 1, "denied_acl": 1}))
    body = build(["a", "b"], cells, 0.4)
    assert [line["name"] for line in body["rates"]["plans"]] == [f"plan{n}" for n in range(RATE_LINES + 1, 1, -1)]
    above = [(a["kind"], a["name"], a["rate"]) for a in body["alert"]["above"]]
    assert above == [("plan", "tiny", 0.5), ("scope", "", 0.5)]  # the scope's latest point is tiny's alone
    assert build(["a", "b"], cells, 0.5)["alert"]["above"] == []  # above, not at


def test_query_values_fall_back_to_defaults():
    assert [range_from(v) for v in ("1h", "30d", "", None, "2h", "1H", "x" * 500)] == [
        "1h",
        "30d",
        "24h",
        "24h",
        "24h",
        "24h",
        "24h",
    ]
    assert [alert_from(v) for v in ("0.05", "0", "1", "1.01", "-0.1", "nan", "inf", "1e-3", "", "x", None)] == [
        0.05,
        0.0,
        1.0,
        None,
        None,
        None,
        None,
        0.001,
        None,
        None,
        None,
    ]


def test_unreachable_redis_falls_back_to_days_with_a_notice(rules, set_quotas):
    """No history readable: the daily chart, saying why; the setting's threshold applies."""
    set_quotas(DENIAL_RATE_ALERT=0.2, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    filters = Filters(range="1h")
    body = charts(filters, rules, UsageSlice(filters, live=False))
    assert (body["shown"], body["resolution"]) == ("30d", "day")
    assert "Redis" in body["notice"]
    assert len(body["labels"]) == filters.days
    assert body["alert"]["threshold"] == 0.2


@pytest.mark.parametrize(("asked", "resolution", "points"), [("1h", "minute", 60), ("24h", "hour", 24),
                                                              ("7d", "hour", 168), ("30d", "day", 30)])  # fmt: skip
def test_the_feed_returns_the_asked_range_of_real_traffic(staff, traffic, asked, resolution, points):
    """15 searches by the free customer (5 refused) and 5 by the pro one show in every range."""
    runtime = default_engine.runtime()
    runtime.history.write(runtime.store.history)  # as the engine's poller does every second
    body = staff.get("/dashboard/data.json", {"range": asked}).json()
    c = body["charts"]
    assert (body["filters"]["range"], c["shown"], c["resolution"], c["notice"]) == (asked, asked, resolution, None)
    assert len(c["labels"]) == points
    # The first refusal asks Redis, the next are refused from the process's memory: every range draws all five
    # as "rate", as the daily rows and the headline cards count them.
    assert (sum(c["allowed"]), sum(c["denied"]["rate"])) == (15, 5)
    assert "local" not in c["denied"]
    assert c["alert"]["threshold"] == 0.1
    assert {(a["kind"], a["name"]) for a in c["alert"]["above"]} == {("plan", "Free"), ("scope", "search")}


@pytest.mark.parametrize("value", ["", "2h", "1H", "\x00", "x" * 5000, "30d;drop", "%00"])
def test_bad_range_and_alert_values_are_ignored(staff, traffic, value):
    """Never a 400 or a 500: an unknown range is the default 24 h, a bad alert the setting's threshold."""
    body = staff.get("/dashboard/data.json", {"range": value, "alert": value}).json()
    assert (body["charts"]["shown"], body["charts"]["alert"]["threshold"]) == ("24h", 0.1)
    assert staff.get("/dashboard/", {"range": value, "alert": value}).status_code == 200


def test_the_alert_threshold_can_be_set_per_page_view(staff, traffic):
    body = staff.get("/dashboard/data.json", {"alert": "0.5"}).json()
    assert body["charts"]["alert"] == {"threshold": 0.5, "above": []}  # 5 of 20 searches refused: 25 %
    page = staff.get("/dashboard/", {"range": "1h", "alert": "0.05"}).content.decode()
    assert '<option value="1h" selected>1 h</option>' in page
    assert 'value="0.05"' in page
