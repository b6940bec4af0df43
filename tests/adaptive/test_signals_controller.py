"""The added signals through a controller run against the test Redis and database, with injected time: latency
and 5xx share from the hosts' samples, the project's LOAD_HOOK, and the time-of-day SCHEDULE (adaptive/controller.py,
hook.py, schedule.py); and what the operator sees of them on the dashboard."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from prometheus_client import REGISTRY

from adaptive.controller import run_controller
from adaptive.publish import read_multipliers
from adaptive.reporter import publish_sample
from adaptive.responses import response_signals
from tests.factories import PlanFactory, UserFactory
from tests.store_client import board_of

#: These tests are of the controller acting on limits: it enforces (the default only observes: test_mode.py).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enforce")]

#: 2026-11-26 00:30 in Paris (winter: UTC+1).
PARIS = ZoneInfo("Europe/Paris")
T0 = datetime(2026, 11, 26, 0, 30, tzinfo=PARIS).timestamp()
SIGNALS = {
    "cpu": {"low": 0.60, "high": 0.80, "critical": 0.95},
    "latency": {"low": 0.8, "high": 1.0, "critical": 2.0},
    "errors": {"low": 0.5, "high": 1.0, "critical": 5.0},
    "hook": {"low": 0.8, "high": 1.0, "critical": 1.5},
}
#: What tests set the project's hook to return (the hook reads it at call time).
project_load: dict[str, Any] = {"value": 0.2, "calls": 0}


def queue_depth() -> Any:
    """The project's hook: its figure, or what a misbehaving hook returns."""
    project_load["calls"] += 1
    value = project_load["value"]
    if isinstance(value, Exception):
        raise value
    return value


NOT_CALLABLE = 42


@pytest.fixture
def plans() -> dict[str, int]:
    return {
        "free": PlanFactory(slug="free", priority=0, is_default=True).pk,
        "pro": PlanFactory(slug="pro", priority=5).pk,
        "enterprise": PlanFactory(slug="enterprise", priority=10).pk,
    }


@pytest.fixture
def staff() -> Client:
    """An operator signed in to the dashboard."""
    client = Client()
    client.force_login(UserFactory(username="ops", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def signals(set_quotas) -> None:
    set_quotas("ADAPTIVE", SIGNALS=SIGNALS, LOAD_HOOK=f"{__name__}.queue_depth")
    project_load.update(value=0.2, calls=0)


def report(redis_client, **fields: Any) -> None:
    """One process's sample, as its reporter thread publishes it: a calm host with ``fields``."""
    sample = {"host": "web1", "pid": 1, "at": time.time(), "cpu": 0.2, "memory": 0.4, "db": None, **fields}
    publish_sample(board_of(redis_client), sample, ttl=60)


def run_until_recovered(redis_client, plans, start: float, calm: Callable[[], None]) -> list[dict[str, float]]:
    """Controller runs every 5 s from ``start`` with ``calm`` load until every plan is back at 1.0 (at most
    5 minutes of runs); returns the free plan's published multipliers on the way."""
    seen = []
    for n in range(60):
        calm()
        run_controller(board_of(redis_client), now=start + 5 * n)
        published = read_multipliers(board_of(redis_client))
        seen.append(published)
        if set(published.values()) == {1.0}:
            break
    return seen


def check_cut(redis_client, plans) -> None:
    """The free plan is cut, pro no more than free, and enterprise not."""
    published = read_multipliers(board_of(redis_client))
    assert published[plans["free"]] < 1.0
    assert published[plans["free"]] <= published[plans["pro"]] <= published[plans["enterprise"]] == 1.0


def check_recovered(seen: list[dict[str, float]], plans) -> None:
    free = [published[plans["free"]] for published in seen]
    assert free == sorted(free)  # gradually up, never down again
    assert set(seen[-1].values()) == {1.0}
    assert len(seen) > 2  # not at once: the level climbs at RECOVERY_RATE


@pytest.mark.parametrize(
    ("loaded", "calm", "reason"),
    [
        ({"latency_ms": 400.0, "latency": 1.6}, {"latency_ms": 60.0, "latency": 0.24}, "cut: latency 1.60"),
        ({"error_rate": 0.04, "errors": 4.0}, {"error_rate": 0.0, "errors": 0.0}, "cut: errors 4.00"),
    ],
    ids=["latency", "errors"],
)
def test_a_response_signal_cuts_then_recovers(redis_client, plans, signals, loaded, calm, reason) -> None:
    """A host's p90 or 5xx share over its target cuts the cheap plans first; back under, limits recover."""
    report(redis_client, **loaded)
    outcome = run_controller(board_of(redis_client), now=T0)
    assert outcome.reason.startswith(reason)
    check_cut(redis_client, plans)
    seen = run_until_recovered(redis_client, plans, T0 + 5, lambda: report(redis_client, **calm))
    check_recovered(seen, plans)


def test_the_hook_cuts_then_recovers(redis_client, plans, signals) -> None:
    """LOAD_HOOK is called once per run; its figure over high cuts, under low recovers; /metrics shows it."""
    report(redis_client)
    project_load["value"] = 1.7
    outcome = run_controller(board_of(redis_client), now=T0)
    assert outcome.reason.startswith("cut: hook 1.70")
    assert outcome.signals["observed"]["hook"] == 1.7
    assert REGISTRY.get_sample_value("quota_load_signal", {"signal": "hook", "host": "controller"}) == 1.7
    check_cut(redis_client, plans)
    project_load["value"] = 0.1
    seen = run_until_recovered(redis_client, plans, T0 + 5, lambda: report(redis_client))
    check_recovered(seen, plans)


@pytest.mark.parametrize(
    "misbehaviour",
    [RuntimeError("queue service down"), "high", float("nan"), -1.0, True, None],
    ids=["raises", "a string", "nan", "negative", "a bool", "None"],
)
def test_a_misbehaving_hook_is_logged_and_ignored(redis_client, plans, signals, caplog, misbehaviour) -> None:
    """Whatever the hook raises or returns that is not a figure >= 0, the run publishes (the other signals
    decide) and the log names the hook."""
    report(redis_client, cpu=0.97)
    project_load["value"] = misbehaviour
    with caplog.at_level(logging.WARNING, logger="adaptive.hook"):
        outcome = run_controller(board_of(redis_client), now=T0)
    assert outcome.signals["observed"]["hook"] is None
    assert outcome.reason.startswith("cut: cpu")  # the controller went on
    assert read_multipliers(board_of(redis_client))[plans["free"]] < 1.0
    assert f"{__name__}.queue_depth" in caplog.text


@pytest.mark.parametrize("path", ["nowhere.load", f"{__name__}.NOT_CALLABLE"])
def test_a_hook_that_does_not_import_or_call_never_stops_the_controller(
    redis_client, plans, signals, set_quotas, caplog, path
) -> None:
    """A path that does not import (the check adaptive.E020 says so at start-up) is logged on each run."""
    set_quotas("ADAPTIVE", LOAD_HOOK=path)
    report(redis_client)
    outcome = run_controller(board_of(redis_client), now=T0)
    assert outcome.signals["observed"]["hook"] is None
    assert set(read_multipliers(board_of(redis_client)).values()) == {1.0}
    assert path in caplog.text


def test_the_hook_is_called_once_a_run_and_only_if_signals_name_it(redis_client, plans, signals, set_quotas) -> None:
    """One call per run; without SIGNALS['hook'] none (the check adaptive.W005 says so)."""
    report(redis_client)
    run_controller(board_of(redis_client), now=T0)
    run_controller(board_of(redis_client), now=T0 + 5)
    assert project_load["calls"] == 2
    set_quotas("ADAPTIVE", SIGNALS={"cpu": SIGNALS["cpu"]})
    outcome = run_controller(board_of(redis_client), now=T0 + 10)
    assert project_load["calls"] == 2
    assert "hook" not in outcome.signals["observed"]


def test_the_schedule_cuts_in_its_window_and_recovers_after(redis_client, plans, signals, set_quotas) -> None:
    """SCHEDULE 01:00-04:00 at 0.5 in Europe/Paris: nothing at 00:30; at 01:00 the level is 0.5 (free cut
    deepest, enterprise untouched) and stays there with healthy load; from 04:00 it recovers to 1.0."""
    set_quotas(
        "ADAPTIVE",
        SCHEDULE=[{"start": "01:00", "end": "04:00", "capacity": 0.5}],
        SCHEDULE_TIME_ZONE="Europe/Paris",
    )
    report(redis_client)
    before = run_controller(board_of(redis_client), now=T0)
    assert set(read_multipliers(board_of(redis_client)).values()) == {1.0}
    assert before.signals["planned"] == {"capacity": 1.0, "by": "no window of the schedule"}

    one = T0 + 30 * 60
    outcome = run_controller(board_of(redis_client), now=one)
    assert outcome.reason == "cut: planned capacity 0.50 (schedule 01:00-04:00 Europe/Paris); level 1.00 -> 0.50"
    published = read_multipliers(board_of(redis_client))
    assert published[plans["free"]] < published[plans["pro"]] < published[plans["enterprise"]] == 1.0
    assert REGISTRY.get_sample_value("quota_load_signal", {"signal": "capacity", "host": "controller"}) == 0.5
    four = one + 3 * 3600
    for at in (one + 600, one + 3600, four - 5):  # healthy load does not lift it inside the window
        report(redis_client)
        assert run_controller(board_of(redis_client), now=at).state.level == 0.5

    seen = run_until_recovered(redis_client, plans, four, lambda: report(redis_client))
    check_recovered(seen, plans)


def test_the_dashboard_shows_the_added_signals(redis_client, plans, signals, set_quotas, staff) -> None:
    """After a run that recorded a change, the overview's adaptive panel has one row per signal in the page's
    units (the p90 in ms, the 5xx share of responses, the hook as a share of its target) and the planned
    capacity with its window."""
    set_quotas("ADAPTIVE", SCHEDULE=[{"start": "00:00", "end": "06:00", "capacity": 0.6}], SCHEDULE_TIME_ZONE="UTC")
    report(redis_client, latency_ms=180.0, latency=0.72, error_rate=0.004, errors=0.4)
    project_load["value"] = 0.85
    run_controller(board_of(redis_client), now=datetime(2026, 11, 26, 3, 0, tzinfo=ZoneInfo("UTC")).timestamp())
    rows = {row["name"]: row for row in staff.get("/dashboard/data.json").json()["adaptive"]["signals"]}
    assert rows["Response time (p90)"]["value"] == "180 ms, 72 % of target"
    assert rows["Server errors (5xx)"]["value"] == "0.40 % of responses, 40 % of target"
    assert rows["Project signal (LOAD_HOOK)"]["value"] == "85 % of target"
    assert rows["Planned capacity"] == {"name": "Planned capacity", "value": "60 %", "note": "schedule 00:00-06:00 UTC"}
    assert rows["CPU"]["value"] == "20.0 %"
    assert "hosts" not in rows  # the snapshot's bookkeeping is not a signal


def test_a_bad_schedule_zone_or_target_never_stops_reporting_or_control(redis_client, plans, set_quotas) -> None:
    """Settings the checks refuse (adaptive.E013, E019) but a process runs with anyway: the run publishes
    without the schedule, and a sample is made without the load figure it cannot compute."""
    set_quotas("ADAPTIVE", SCHEDULE=[{"start": "00:00", "end": "24:00", "capacity": 0.5}], SCHEDULE_TIME_ZONE="Nowhere")
    report(redis_client)
    outcome = run_controller(board_of(redis_client), now=T0)
    assert "planned" not in outcome.signals
    assert set(read_multipliers(board_of(redis_client)).values()) == {1.0}
    fields = response_signals([(0.1, 200)] * 20, latency_target_ms=0, error_rate_target=0.01, min_responses=20)
    assert (fields["latency_ms"], fields["latency"], fields["errors"]) == (100.0, None, 0.0)
