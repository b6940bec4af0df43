"""Every series /metrics exports is written by the product: set by its code, or computed at each scrape.

A gauge registered but never set reads 0 on a dashboard forever, which looks like good news. The first test
reads the source: every metric object of quotas.metrics must be reached from product code
outside that module (through itself or a function of the module that writes it). The others scrape the two
series computed at scrape time, from what they describe.
"""

from __future__ import annotations

import ast
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from prometheus_client.metrics import MetricWrapperBase

from plans.models import ClientBan
from quotas import metrics
from quotas.engine import default_engine
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from usage.flush import flush_usage

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("quotas", "plans", "usage", "adaptive", "dashboard")
METRICS_MODULE = ROOT / "quotas" / "metrics.py"


def _writers() -> dict[str, set[str]]:
    """Metric variable -> names of the module's functions that use it (directly or through each other)."""
    tree = ast.parse(METRICS_MODULE.read_text())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    used = {name: {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} for name, fn in functions.items()}
    variables = [name for name, obj in vars(metrics).items() if isinstance(obj, MetricWrapperBase)]
    writers: dict[str, set[str]] = {}
    for variable in variables:
        found = {name for name, names in used.items() if variable in names}
        while True:  # a function calling a writer writes too
            more = {name for name, names in used.items() if names & found} - found
            if not more:
                break
            found |= more
        writers[variable] = {variable, *found}
    return writers


def _product_source() -> str:
    files = [p for app in PRODUCT for p in (ROOT / app).rglob("*.py") if p != METRICS_MODULE]
    return "\n".join(p.read_text() for p in files if "migrations" not in p.parts)


def test_every_registered_metric_is_written_by_product_code():
    source = _product_source()
    unwritten = [
        variable
        for variable, names in _writers().items()
        if not any(re.search(rf"\b{re.escape(name)}\b", source) for name in names)
    ]
    assert unwritten == [], f"registered but never written outside metrics.py: {unwritten}"


@pytest.fixture
def scrape(client, set_quotas):
    set_quotas("METRICS", ALLOW_LOOPBACK=True)

    def read() -> str:
        response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
        assert response.status_code == 200
        return response.content.decode()

    return read


def sample(text: str, name: str) -> float | None:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_active_bans_count_the_clients_banned_now(scrape):
    """A client the engine bans shows at once; a lifted or ended ban does not."""
    from rest_framework.test import APIClient

    assert sample(scrape(), "quota_active_bans") == 0
    plan = PlanFactory(slug="free", is_default=True, ban_threshold=2, ban_window=10, ban_durations="600")
    EndpointLimitFactory(plan=plan, name="global", rates="1/min", algorithm="fixed_window")
    api, key = APIClient(), issue_key(plan=plan)
    for _ in range(5):
        api.get("/api/demo/ping", HTTP_X_API_KEY=key)
    assert ClientBan.objects.count() == 1
    assert sample(scrape(), "quota_active_bans") == 1
    ClientBan.objects.update(lifted_at=timezone.now())
    assert sample(scrape(), "quota_active_bans") == 0
    ClientBan.objects.update(lifted_at=None, until=timezone.now() - timedelta(seconds=1))
    assert sample(scrape(), "quota_active_bans") == 0


@pytest.mark.django_db
def test_the_flush_lag_is_the_age_of_the_last_completed_flush(scrape, redis_client):
    """No series before any flush; about 0 right after one; it grows while no flush completes."""
    assert sample(scrape(), "quota_usage_flush_lag_seconds") is None
    flush_usage()
    assert 0 <= sample(scrape(), "quota_usage_flush_lag_seconds") < 5
    seconds, _ = redis_client.time()
    started = datetime.fromtimestamp(seconds - 600, tz=UTC)
    default_engine.runtime().back_office.mark_flushed(started)  # the last flush that completed, 10 min ago
    assert 600 <= sample(scrape(), "quota_usage_flush_lag_seconds") < 605
