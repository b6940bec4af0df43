"""OpenTelemetry (``QUOTAS['OPENTELEMETRY']``): a span and OTel metrics per decision, read back through the SDK's
in-memory exporters, as a project that configures the SDK would export them."""

from __future__ import annotations

import subprocess
import sys
from decimal import Decimal

import pytest
from django.core import checks
from rest_framework.test import APIClient

from quotas.observability import otel
from tests.conftest import import_extra
from tests.doc_blocks import doc_block
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

trace = import_extra("opentelemetry.trace")
metrics_api = import_extra("opentelemetry.metrics")
sdk_trace = import_extra("opentelemetry.sdk.trace")
sdk_metrics = import_extra("opentelemetry.sdk.metrics")
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

_SPANS = InMemorySpanExporter()
_METRICS = InMemoryMetricReader()


@pytest.fixture(scope="module", autouse=True)
def sdk():
    """The SDK, configured the way a project configures it: global providers with in-memory exporters (a
    global provider can be set once per process, so every test of this module shares them, and a worker that
    comes back to this module after others finds them set)."""
    if not isinstance(metrics_api.get_meter_provider(), sdk_metrics.MeterProvider):
        provider = sdk_trace.TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_SPANS))
        trace.set_tracer_provider(provider)
        metrics_api.set_meter_provider(sdk_metrics.MeterProvider(metric_readers=[_METRICS]))
    if not isinstance(trace.get_tracer_provider(), sdk_trace.TracerProvider):
        pytest.fail("another test set a global tracer provider first")


@pytest.fixture
def spans():
    _SPANS.clear()
    yield _SPANS
    _SPANS.clear()


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", monthly_price=Decimal("0"), is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="2/min", algorithm="fixed_window")
    return plan


def decisions(**attributes: str) -> int:
    """The ``quota.decisions`` count with these attributes, as the metric reader collects it now."""
    data = _METRICS.get_metrics_data()
    total = 0
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != "quota.decisions":
                    continue
                for point in metric.data.data_points:
                    if all(point.attributes.get(k) == v for k, v in attributes.items()):
                        total += point.value
    return total


def test_each_decision_is_a_span_with_its_plan_outcome_and_store_time(set_quotas, spans, free):
    """Over HTTP: an admitted request and a refused one each leave a ``quota.decision`` span."""
    set_quotas(OPENTELEMETRY=True)
    client, key = APIClient(), issue_key(plan=free)
    statuses = [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    finished = [s for s in spans.get_finished_spans() if s.name == "quota.decision"]
    assert [s.attributes["quota.outcome"] for s in finished] == ["allowed", "allowed", "denied"]
    refused = finished[-1]
    assert refused.attributes["quota.plan"] == "free"
    assert refused.attributes["quota.reason"] == "rate"
    assert refused.attributes["quota.windows"] == 1
    assert refused.attributes["quota.store.duration_ms"] > 0  # the store was asked
    assert refused.end_time >= refused.start_time
    assert not any(key in str(value) for s in finished for value in s.attributes.values())  # no client in a span


def test_decisions_are_counted_as_otel_metrics_beside_prometheus(set_quotas, spans, free):
    """Two admitted, then a refusal by Redis and one this process remembered (no store call): each counted
    under its outcome and reason."""
    set_quotas(OPENTELEMETRY=True)
    plan = {"quota.plan": "free"}
    before = [decisions(**plan, **{"quota.outcome": o}) for o in ("allowed", "denied")]
    client, key = APIClient(), issue_key(plan=free)
    assert [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(4)] == [200, 200, 429, 429]
    after = [decisions(**plan, **{"quota.outcome": o}) for o in ("allowed", "denied")]
    assert [a - b for a, b in zip(after, before, strict=True)] == [2, 2]
    remembered = [s for s in spans.get_finished_spans() if s.name == "quota.decision"][-1]
    assert remembered.attributes["quota.reason"] == "local"


def test_off_by_default_nothing_is_recorded(spans, free):
    """Without QUOTAS['OPENTELEMETRY'] no span is made, even with an SDK configured."""
    client, key = APIClient(), issue_key(plan=free)
    before = decisions(**{"quota.plan": "free"})
    assert client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code == 200
    assert [s for s in spans.get_finished_spans() if s.name == "quota.decision"] == []
    assert decisions(**{"quota.plan": "free"}) == before


def test_the_system_check_says_when_the_api_is_missing(set_quotas, monkeypatch):
    """quotas.E071: OPENTELEMETRY on without opentelemetry-api installed (simulated by a failing import)."""
    set_quotas(OPENTELEMETRY=True)
    ids = lambda: {m.id for m in checks.run_checks()}  # noqa: E731
    assert "quotas.E071" not in ids()
    monkeypatch.setattr("quotas.checks.engine.otel_available", lambda: False)
    assert "quotas.E071" in ids()
    assert otel.available()


def test_a_setting_that_is_not_a_bool_is_refused_at_start_up(set_quotas):
    set_quotas(OPENTELEMETRY="yes")
    assert "quotas.E070" in {m.id for m in checks.run_checks()}


@pytest.mark.slow  # a real Python process
def test_the_docs_sdk_snippet_runs_as_written(tmp_path):
    """docs/operations.md's SDK configuration runs as written (in its own process: a global provider is set
    once per process)."""
    source = doc_block("operations.md", "otel-sdk")
    script = tmp_path / "otel_settings.py"
    script.write_text(source + "\nassert QUOTAS['OPENTELEMETRY'] is True\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
