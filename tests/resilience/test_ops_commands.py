"""The operators' commands on a real Redis Cluster (3 primaries) and a real Sentinel group: quota_doctor asks
every primary, quota_status and quota_reset find a client's keys on the node that serves them."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from quotas.contract.keys import client_tag
from quotas.formats.rates import parse_rates
from quotas.rules.limits import LimitRule
from tests.factories import EndpointLimitFactory, PlanFactory
from tests.store_client import client_of

pytestmark = pytest.mark.django_db


def run_json(command: str, *args: str) -> dict:
    out = StringIO()
    call_command(command, *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def tags_on_every_primary(runtime) -> list[str]:
    """Client tags whose keys land on each primary in turn (one tag where there is a single server)."""
    client = client_of(runtime)
    if not hasattr(client, "get_primaries"):
        return ["{s.0}"]
    by_node: dict[str, str] = {}
    i = 0
    while len(by_node) < len(client.get_primaries()):
        tag = f"{{s.{i}}}"
        by_node.setdefault(client.get_node_from_key(runtime.store.keys_of(tag).bucket).name, tag)
        i += 1
    return list(by_node.values())


def test_the_doctor_asks_every_primary(topology, topo_runtime):
    """Before any decision the library is missing everywhere (a warning naming the nodes); after one decision
    on each primary, every check is ok."""
    plan = PlanFactory(slug="free", is_default=True)  # else quotas.W032: anonymous clients unlimited
    EndpointLimitFactory(plan=plan, name="global", rates="100/min")  # else quota_plans.W001, for the same reason
    report = run_json("quota_doctor")
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["redis"]["status"] == "ok"
    assert report["topology"].startswith(topology.name)
    assert checks["library"]["status"] == "warning"
    windows = LimitRule(id="d", name="d", rates=parse_rates("10/min")).windows
    for tag in tags_on_every_primary(topo_runtime):
        assert topo_runtime.guard.decide(tag, windows).allowed
    report = run_json("quota_doctor")
    assert {c["name"]: c["status"] for c in report["checks"]} == {
        "redis": "ok", "library": "ok", "clock": "ok", "rules": "ok", "failure_mode": "ok", "django": "ok",
    }  # fmt: skip
    if topology.name == "cluster":
        assert "3 primaries answered PING" in report["checks"][0]["detail"]
        assert report["checks"][1]["detail"].endswith("loaded on all 3 primaries")


def test_status_and_reset_of_clients_on_every_primary(topology, topo_runtime):
    """A client's counters, sliding log and ban are read and deleted on whichever node serves its slot."""
    plan = PlanFactory(slug="free", is_default=True, ban_threshold=1, ban_window=60, ban_durations="600")
    EndpointLimitFactory(plan=plan, name="minute", rates="3/min", algorithm="fixed_window")
    EndpointLimitFactory(plan=plan, name="log", rates="10/min", algorithm="sliding_window_log")
    rules = topo_runtime.rules.current()
    windows = [w for rule in rules.plans[plan.pk].limits for w in rule.windows]
    for i in range(3):
        address = f"198.51.100.{i + 1}"
        tag = client_tag("ip", address)
        decisions = [topo_runtime.guard.decide(tag, windows, ban_policy=rules.plans[plan.pk].ban_policy)
                     for _ in range(6)]  # fmt: skip
        assert [d.allowed for d in decisions] == [True] * 3 + [False] * 3
        report = run_json("quota_status", address)
        assert {w["name"]: w["used"] for w in report["limits"]} == {"minute": 3, "log": 3}
        assert report["ban"] is not None
        reset = run_json("quota_reset", address)
        assert reset["deleted"] >= 3  # the window's field, the ban, the sliding log's key (and the expiry)
        report = run_json("quota_status", address)
        assert {w["name"]: w["used"] for w in report["limits"]} == {"minute": 0, "log": 0}
        assert report["ban"] is None
