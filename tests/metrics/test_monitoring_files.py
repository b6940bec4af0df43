"""The monitoring files the package ships (quotas/monitoring/): Prometheus alerting rules that promtool accepts
and that fire and clear on synthetic series (alerts.test.yml), and a Grafana dashboard; both query only series
a real /metrics scrape exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.doc_blocks import doc_block
from usage.flush import flush_usage

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "quotas" / "monitoring"
RULES = MONITORING / "prometheus-alerts.yml"
RULES_TEST = Path(__file__).with_name("alerts.test.yml")
DASHBOARD = MONITORING / "grafana-dashboard.json"
#: Every alert the operations page promises.
ALERTS = {
    "QuotaPlanDenialRateHigh", "QuotaEngineFailureMode", "QuotaAdaptiveCut", "QuotaUsageFlushLagging",
    "QuotaFailedAuthBlocksSurging", "QuotaRedisErrors", "QuotaRulesSnapshotStale",
}  # fmt: skip
_SERIES = re.compile(r"\bquota_[a-z_]+\b")
_HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    found = shutil.which("promtool")
    if found is None:
        skip_or_fail("promtool is not installed (Debian: apt-get install prometheus)")
    return subprocess.run(
        [found, *args], cwd=RULES_TEST.parent, capture_output=True, text=True, timeout=60, check=False
    )


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def rule_exprs() -> list[str]:
    return re.findall(r"expr: \|?\n?((?:.+\n)+?)\s+for:", RULES.read_text(encoding="utf-8"))


def test_promtool_accepts_the_rules_and_every_alert_fires_and_clears():
    """`promtool check rules`, then `promtool test rules`: each alert pending, firing with its labels and
    annotations, then resolved, on synthetic series of two processes."""
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout
    tested = promtool("test", "rules", RULES_TEST.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    fired = set(re.findall(r"alertname: (\w+)", RULES_TEST.read_text(encoding="utf-8")))
    assert fired == ALERTS  # each alert has its test
    assert set(re.findall(r"- alert: (\w+)", RULES.read_text(encoding="utf-8"))) == ALERTS


def test_the_dashboard_is_an_importable_grafana_json():
    """Grafana's import: a datasource input every query uses, unique panel ids, panels inside 24 columns."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["targets"], panel["title"]
        assert all(t["expr"] and t["datasource"]["uid"] == "${DS_PROMETHEUS}" for t in panel["targets"])
    assert any("$plan" in expr for expr in dashboard_exprs())  # the plan variable filters


@pytest.mark.django_db
def test_every_series_the_rules_and_the_dashboard_query_is_exported(client, set_quotas):
    """Each quota_* name in an alert's or a panel's query is a family of a real /metrics scrape (a histogram's
    _bucket, _sum and _count included), so no panel stays empty and no alert waits for a series that never
    comes."""
    set_quotas("METRICS", ALLOW_LOOPBACK=True)
    flush_usage()  # the flush lag is exported once a flush has completed
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    families = dict(re.findall(r"^# TYPE (quota_\w+) (\w+)$", response.content.decode(), re.M))
    exported = set(families) | {f + part for f, kind in families.items() if kind == "histogram" for part in
                                _HISTOGRAM_PARTS}  # fmt: skip
    queried = {name for expr in dashboard_exprs() + rule_exprs() for name in _SERIES.findall(expr)}
    assert len(rule_exprs()) == len(ALERTS)  # the scan reads every rule
    assert queried - exported == set(), f"queried but not exported: {sorted(queried - exported)}"
    assert {"quota_decisions_total", "quota_usage_flush_lag_seconds", "quota_active_bans"} <= queried


def test_the_documented_prometheus_and_alertmanager_configs_are_valid(tmp_path: Path):
    """The operations page's prometheus.yml (its rule file and token file put where it says, under a temporary
    root) passes `promtool check config`, rules included; its alertmanager.yml passes `amtool check-config`."""
    config = doc_block("operations.md", "prometheus-config", "yaml").replace("/etc/", f"{tmp_path}/etc/")
    (tmp_path / "etc/prometheus/rules").mkdir(parents=True)
    shutil.copy(RULES, tmp_path / "etc/prometheus/rules/prometheus-alerts.yml")
    (tmp_path / "etc/prometheus/quota-metrics-token").write_text("a-token\n")
    (tmp_path / "prometheus.yml").write_text(config)
    checked = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout
    amtool = shutil.which("amtool")
    if amtool is None:
        skip_or_fail("amtool is not installed (Debian: apt-get install prometheus-alertmanager)")
    (tmp_path / "alertmanager.yml").write_text(doc_block("operations.md", "alertmanager-config", "yaml"))
    routed = subprocess.run(
        [amtool, "check-config", str(tmp_path / "alertmanager.yml")], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert routed.returncode == 0, routed.stdout + routed.stderr
