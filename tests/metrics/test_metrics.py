"""quotas.metrics: what each call records, bounded labels, and an exposition promtool accepts."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from quotas import metrics
from quotas.metrics_exposition import default_series, exposition
from tests.conftest import skip_or_fail

# Admitted at collection, before any test runs: a process admits only its first MAX_PLANS plans as labels of
# their own (tests before this one may have used them all), and a value once admitted stays so.
metrics.plan_label("flood")


def value(name: str, **labels: str) -> float:
    """A sample of the default registry (0 when absent)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def label_values(metric: str, label: str) -> set[str]:
    """Every value ``label`` takes in ``metric``'s samples, as exposed."""
    text = exposition()[0].decode()
    return {
        sample.labels[label]
        for family in text_string_to_metric_families(text)
        if family.name == metric
        for sample in family.samples
        if label in sample.labels
    }


def promtool_check(text: str) -> subprocess.CompletedProcess:
    """``promtool check metrics`` on ``text`` (skips, or fails in CI, without promtool)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        skip_or_fail("promtool is not installed (Debian: apt-get install prometheus)")
    return subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30, check=False
    )


def test_observe_decision_counts_and_times_one_decision():
    """One call adds 1 to quota_decisions_total for its labels and one observation to the histogram."""
    labels = {"plan": "pro", "scope": "search", "outcome": "denied", "reason": "rate"}
    before = value("quota_decisions_total", **labels)
    before_count = value("quota_decision_seconds_count", outcome="denied")
    before_fast = value("quota_decision_seconds_bucket", outcome="denied", le="0.00025")
    metrics.observe_decision("pro", "search", "denied", "rate", 0.0002)
    assert value("quota_decisions_total", **labels) == before + 1
    assert value("quota_decision_seconds_count", outcome="denied") == before_count + 1
    assert value("quota_decision_seconds_bucket", outcome="denied", le="0.00025") == before_fast + 1


def test_several_durations_at_once_count_as_one_call_each():
    """observe_decision with several durations (the ledger's fold) counts and times each of them."""
    labels = {"plan": "pro", "scope": "search", "outcome": "allowed", "reason": "none"}
    before = value("quota_decisions_total", **labels)
    before_count = value("quota_decision_seconds_count", outcome="allowed")
    before_slow = value("quota_decision_seconds_bucket", outcome="allowed", le="0.1")
    metrics.observe_decision("pro", "search", "allowed", "none", 0.0002, 0.05, 0.07)
    assert value("quota_decisions_total", **labels) == before + 3
    assert value("quota_decision_seconds_count", outcome="allowed") == before_count + 3
    assert value("quota_decision_seconds_bucket", outcome="allowed", le="0.1") == before_slow + 3


def test_a_batch_histogram_shows_the_samples_a_histogram_shows():
    """metrics_fold.BatchHistogram, a batch at a time through prometheus_client's public API, and
    Histogram.observe one by one: the same series, buckets and counts, bounds, zero, negatives and +Inf
    included, and the same sum (to rounding: a batch's is added at once)."""
    from prometheus_client import Histogram

    from quotas.metrics_fold import BatchHistogram

    amounts = [0.0, 0.00005, 0.00007, 0.1, 0.1000001, 7.5, -0.001, 1e-9, 0.0025, 0.3, 0.0049999] * 3
    one = Histogram("h", "h", ["outcome"], buckets=metrics.DECISION_BUCKETS, registry=None)
    many = BatchHistogram("h", "h", ["outcome"], metrics.DECISION_BUCKETS)
    for amount in amounts:
        one.labels("allowed").observe(amount)
    many.labels("allowed").observe_all(amounts[:10])
    many.labels("allowed").observe_all(amounts[10:])
    one.labels("denied")
    many.labels("denied")  # a child nothing was observed in: its series show, at 0

    def samples(families) -> list[tuple[str, dict[str, str], float]]:
        return [(s.name, s.labels, s.value) for m in families for s in m.samples if s.name != "h_created"]

    batched, observed = samples(many.collect()), samples(one.collect())
    assert [s for s in batched if s[0] != "h_sum"] == [s for s in observed if s[0] != "h_sum"]
    assert [s[:2] for s in batched] == [s[:2] for s in observed]
    assert [s[2] for s in batched if s[0] == "h_sum"] == pytest.approx([s[2] for s in observed if s[0] == "h_sum"])
    assert [m.type for m in many.describe()] == ["histogram"]


def test_missing_plan_and_scope_are_labelled_none():
    labels = {"plan": "none", "scope": "none", "outcome": "allowed", "reason": "none"}
    before = value("quota_decisions_total", **labels)
    metrics.observe_decision(None, "", "allowed", "none", 0.0001)
    assert value("quota_decisions_total", **labels) == before + 1


def test_histogram_buckets_span_50us_to_50ms():
    assert metrics.DECISION_BUCKETS[0] == 0.00005
    assert 0.05 in metrics.DECISION_BUCKETS
    assert list(metrics.DECISION_BUCKETS) == sorted(metrics.DECISION_BUCKETS)


def decisions_of(plan: str) -> float:
    """Allowed decisions of ``plan`` counted so far, over every scope."""
    text = exposition()[0].decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "quota_decisions"
        for sample in family.samples
        if sample.name == "quota_decisions_total" and sample.labels["plan"] == plan
    )


def test_a_flood_of_distinct_scopes_keeps_the_label_set_bounded():
    """1,000 distinct scopes add at most MAX_SCOPES series of their own; the rest count as 'other'."""
    scopes_before = label_values("quota_decisions", "scope")
    counted_before = decisions_of("flood")
    overflow_before = value("quota_metrics_label_overflow_total", label="scope")
    for i in range(1000):
        metrics.observe_decision("flood", f"flood-scope-{i}", "allowed", "none", 0.0001)
    added = label_values("quota_decisions", "scope") - scopes_before
    assert len(added - {metrics.OTHER}) <= metrics.MAX_SCOPES
    assert len(metrics.scope_label.seen) == metrics.MAX_SCOPES
    assert value("quota_decisions_total", plan="flood", scope="other", outcome="allowed", reason="none") > 0
    assert value("quota_metrics_label_overflow_total", label="scope") - overflow_before >= 1000 - metrics.MAX_SCOPES
    assert decisions_of("flood") - counted_before == 1000  # every decision is still counted


def test_no_scope_is_none_once_the_bound_is_reached():
    """A request without a scope keeps its "none" series after a flood of scopes filled the bound (it was counted
    as "other" then)."""
    for i in range(metrics.MAX_SCOPES + 1):
        metrics.scope_label.admit(f"full-scope-{i}")
    assert metrics.scope_label("") == metrics.scope_label(None) == "none"
    assert metrics.scope_label("full-scope-beyond") == metrics.OTHER


def test_a_flood_of_plans_hosts_and_operations_is_bounded_too():
    before = {
        "plan": label_values("quota_adaptive_multiplier", "plan"),
        "host": label_values("quota_load_signal", "host"),
        "operation": label_values("quota_redis_errors", "operation"),
    }
    for i in range(500):
        metrics.set_multiplier(f"plan-{i}", 1.0)
        metrics.set_load_signal("cpu", f"host-{i}", 0.5)
        metrics.observe_redis_error(f"op-{i}")
    assert len(label_values("quota_adaptive_multiplier", "plan") - before["plan"]) <= metrics.MAX_PLANS + 1
    assert len(label_values("quota_load_signal", "host") - before["host"]) <= metrics.MAX_HOSTS + 1
    assert len(label_values("quota_redis_errors", "operation") - before["operation"]) <= metrics.MAX_OPERATIONS + 1


@pytest.mark.parametrize("text", ["a key=with spaces", "x" * 65, "k_3f9a\n", "/api/demo/ping?q=1"])
def test_unsafe_label_values_are_counted_as_other(text):
    """Anything that is not a short word (a path, a raw key, a newline) never becomes a label value."""
    assert metrics.scope_label(text) == metrics.OTHER


def test_unknown_outcome_or_reason_is_counted_as_other_not_raised():
    """A caller's typo must not fail the request: it is counted as 'other' and logged once."""
    labels = {"plan": "free", "scope": "none", "outcome": "other", "reason": "other"}
    before = value("quota_decisions_total", **labels)
    metrics.observe_decision("free", None, "maybe", "cosmic-rays", 0.001)
    assert value("quota_decisions_total", **labels) == before + 1


def test_engine_mode_is_one_for_the_current_mode_only():
    metrics.set_engine_mode("closed")
    assert [value("quota_engine_mode", mode=m) for m in metrics.ENGINE_MODES] == [0, 0, 0, 1]
    metrics.set_engine_mode("normal")
    assert [value("quota_engine_mode", mode=m) for m in metrics.ENGINE_MODES] == [1, 0, 0, 0]


@pytest.mark.django_db
def test_every_contracted_series_is_there_before_any_event(client, set_quotas):
    """A fresh scrape already holds every Redis-errors operation at 0 and every engine mode."""
    set_quotas("METRICS", ALLOW_LOOPBACK=True)
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    for operation in metrics.REDIS_OPERATIONS:
        assert re.search(rf'^quota_redis_errors_total{{operation="{operation}"}} \d', text, re.M), operation
    for mode in ("normal", "fallback", "open", "closed"):
        assert f'quota_engine_mode{{mode="{mode}"}}' in text


def test_gauges_hold_the_last_value_set():
    metrics.set_multiplier("free", 0.25)
    metrics.set_load_signal("cpu", "web-1", 0.875)
    assert value("quota_adaptive_multiplier", plan="free") == 0.25
    assert value("quota_load_signal", signal="cpu", host="web-1") == 0.875


def test_redis_errors_are_counted_by_operation():
    before = value("quota_redis_errors_total", operation="refund")
    metrics.observe_redis_error("refund")
    assert value("quota_redis_errors_total", operation="refund") == before + 1


@pytest.mark.django_db
def test_exposition_passes_promtool_check_metrics():
    """Every metric family, with samples in each, is valid and lint-clean for promtool."""
    metrics.observe_decision("free", "search", "allowed", "none", 0.0003)
    metrics.observe_decision("free", "search", "shadow_denied", "rate", 0.0004)
    metrics.observe_redis_error("decide")
    metrics.set_engine_mode("normal")
    metrics.set_multiplier("free", 0.5)
    metrics.set_load_signal("cpu", "web-1", 0.5)
    body, content_type = exposition(defaults=default_series())
    assert content_type.startswith("text/plain; version=0.0.4")
    result = promtool_check(body.decode())
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "", result.stdout  # no lint warnings either


def test_exposition_speaks_openmetrics_when_asked():
    body, content_type = exposition("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith(b"# EOF")
