"""Every series a dashboard or alert watches exists from the first scrape of /metrics, before anything set it.

A freshly started gunicorn (no request served, no controller run yet) answers
its first scrape with the adaptive multiplier of every plan (1: nothing is
cut) and the load signals of its host; in the same process, a value that was
published is shown as published, never masked by the default.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from adaptive.conf import adaptive_settings
from adaptive.publish import publish_multipliers
from config.embedded_redis import free_port
from demo.seed import demo_plans
from quotas import metrics
from quotas.engine import default_engine
from tests.factories import PlanFactory
from tests.process_groups import stop_groups
from tests.sqlite_template import SqliteTemplates
from tests.store_client import board_of

from .test_metrics import promtool_check

BASE_DIR = Path(__file__).resolve().parents[2]
TOKEN = "first-scrape-token"


def series(body: str, name: str) -> dict[frozenset, float]:
    """The samples of the gauge ``name`` in an exposition, by label set (asserting no label set repeats)."""
    found: dict[frozenset, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name:
                labels = frozenset(sample.labels.items())
                assert labels not in found, f"{name}{dict(labels)} twice"
                found[labels] = sample.value
    return found


def of(**labels: str) -> frozenset:
    return frozenset(labels.items())


@contextlib.contextmanager
def gunicorn(tmp_path: Path, redis_url: str, multiprocess: bool, templates: SqliteTemplates) -> Iterator[int]:
    """A fresh gunicorn (migrated, seeded SQLite; the load reporter off), up but asked nothing yet; yields its port."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        RUN_DIR=str(tmp_path / "run"),
        REDIS_URL=redis_url,
        METRICS_TOKEN=TOKEN,
        ADAPTIVE_REPORT_INTERVAL="0",
    )
    templates.copy(tmp_path / "db.sqlite3", env, seeded=True)
    if multiprocess:  # as `make run` serves: every worker's metrics in files, summed by /metrics
        env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "prometheus")
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--no-control-socket",
    ]
    argv += ["-c", "config/gunicorn.py", "--workers", "2"] if multiprocess else ["--workers", "1"]
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 20
        while True:  # listening is enough: no request may reach the application before the scrape
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("gunicorn did not start:\n" + log.read_text(errors="replace")[-3000:])
            time.sleep(0.1)
        yield port
    finally:
        stop_groups([proc])


def scrape(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        body = response.read().decode()
    finally:
        conn.close()
    assert response.status == 200, body
    return body


@pytest.mark.slow
@pytest.mark.parametrize("multiprocess", [True, False], ids=["multiprocess", "single-process"])
def test_the_first_scrape_after_a_fresh_start_has_multipliers_and_load_signals(
    tmp_path, redis_server, multiprocess, sqlite_templates
):
    """First request to a new gunicorn: /metrics with the token lists every demo plan at 1 and this host's signals."""
    with gunicorn(tmp_path, redis_server.url, multiprocess, sqlite_templates) as port:
        body = scrape(port)
    assert series(body, "quota_adaptive_multiplier") == {of(plan=plan.key): 1.0 for plan in demo_plans().plans}
    signals = series(body, "quota_load_signal")
    assert set(signals) == {of(signal=name, host=socket.gethostname()) for name in adaptive_settings.SIGNALS}
    check = promtool_check(body)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.fixture
def staff_client(db) -> Client:
    browser = Client()
    browser.force_login(get_user_model().objects.create_user("ops", password="x", is_staff=True))
    return browser


def test_a_new_plan_is_at_the_multiplier_in_force(staff_client, redis_client):
    """A plan nobody published a multiplier for is at 1, or at the cut the controller published to Redis."""
    nominal, reduced = PlanFactory(slug="first-scrape-a"), PlanFactory(slug="first-scrape-b")
    publish_multipliers(board_of(redis_client), {reduced.pk: 0.5}, time.time(), 60)
    default_engine.runtime().multipliers.refresh(
        default_engine.runtime().store.multipliers
    )  # what the poller does every second
    shown = series(staff_client.get("/metrics").content.decode(), "quota_adaptive_multiplier")
    assert shown[of(plan=nominal.slug)] == 1.0
    assert shown[of(plan=reduced.slug)] == 0.5


def test_a_published_value_is_never_masked_by_its_default(staff_client, redis_client):
    """What a process set (the controller's export) is shown once, as set; only missing series get a default."""
    plan = PlanFactory(slug="first-scrape-c")
    metrics.set_multiplier(plan.slug, 0.7)
    metrics.set_load_signal("cpu", "first-scrape-host", 0.42)
    body = staff_client.get("/metrics").content.decode()
    assert series(body, "quota_adaptive_multiplier")[of(plan=plan.slug)] == 0.7
    assert series(body, "quota_load_signal")[of(signal="cpu", host="first-scrape-host")] == 0.42
