"""The shipped worker layout with a slow webhook receiver: the Procfile's two Celery workers, real processes on
the test's own Redis, the dispatcher routed to its own queue by the project's settings.

While a receiver trickles its answer a byte every 0.2 s (about 30 s in all), another task (``usage.flush``)
runs to completion and another endpoint gets its webhook; the slow delivery ends at its deadline (TIMEOUT 5 s,
tests/notifications/worker_settings.py) with a timeout recorded against its own endpoint.
"""

from __future__ import annotations

import shlex
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings
from django.db import connections
from django.utils import timezone

from notifications.models import Delivery, Endpoint
from notifications.record import record_event
from notifications.secrets import encrypt, new_secret
from tests.factories import SubscriptionFactory
from tests.process_groups import stop_groups
from tests.slow_server import slow_server
from tests.usage.processes import WorkerDatabase, process_env

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 5.0  # as worker_settings.py sets it


def procfile_command(name: str) -> list[str]:
    """The Procfile's line ``name`` as an argv run by this interpreter, quiet between workers (no gossip)."""
    lines = dict(line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if ": " in line
                 and not line.startswith("#"))  # fmt: skip
    argv = shlex.split(lines[name].removeprefix("exec "))
    assert argv[0] == "celery"
    return [sys.executable, "-m", "celery", *argv[1:], "--without-gossip", "--without-mingle", "--without-heartbeat"]


def wait_until(condition: Callable[[], bool], timeout: float, what: str, log: Callable[[], str]) -> float:
    """Poll ``condition``; the moment (monotonic) it held. AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{log()[-4000:]}"
        time.sleep(0.05)
    return time.monotonic()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], Callable[[], str]]]:
    """``start(env)``: the Procfile's ``worker`` and ``notifier`` started, once both are ready; returns a reader
    of their log. Stopped (their process groups) after the test."""
    procs: list[subprocess.Popen] = []
    log_path = tmp_path / "workers.log"

    def log() -> str:
        return log_path.read_text(errors="replace") if log_path.exists() else ""

    def start(env: dict[str, str]) -> Callable[[], str]:
        with log_path.open("ab") as out:
            for name in ("worker", "notifier"):
                procs.append(subprocess.Popen(procfile_command(name), cwd=ROOT, env=env, stdout=out, stderr=out,
                                              start_new_session=True))  # fmt: skip
        wait_until(lambda: log().count(" ready.") >= 2, 90, "both workers to be ready", log)
        return log

    yield start
    stop_groups(procs)


def delivery_row(database: WorkerDatabase, endpoint_id: int) -> tuple:
    """(status, failure, attempts, error) of the endpoint's delivery, as the workers wrote it."""
    if database.vendor != "sqlite":
        row = Delivery.objects.filter(endpoint_id=endpoint_id).values_list("status", "failure", "attempts", "error")
        return row.get()
    db = sqlite3.connect(database.sqlite_path, timeout=20)
    try:
        query = "SELECT status, failure, attempts, error FROM quota_notifications_delivery WHERE endpoint_id = ?"
        return db.execute(query, (endpoint_id,)).fetchone()
    finally:
        db.close()


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.django_db(transaction=True)
def test_a_slow_receiver_holds_up_no_other_task_and_ends_at_its_deadline(redis_server, receiver, workers, tmp_path):
    """The dispatcher, sent to its queue, meets a receiver trickling its answer: meanwhile a usage flush finishes
    on the other worker and the other endpoint gets its webhook; the slow delivery ends about TIMEOUT after it
    began, with a timeout counted against its own endpoint only."""
    subscription = SubscriptionFactory()
    with slow_server(interval=0.2) as slow:
        slow_endpoint = Endpoint.objects.create(subscription=subscription, url=slow.url, events=[],
                                                secret_encrypted=encrypt(new_secret()))  # fmt: skip
        fast_endpoint = Endpoint.objects.create(subscription=subscription, url=receiver.url, events=[],
                                                secret_encrypted=encrypt(new_secret()))  # fmt: skip
        record_event("refusals.sustained", subscription, "slow", {"refused": 100}, timezone.now())
        database = WorkerDatabase(tmp_path)
        database.publish()
        connections.close_all()
        env = process_env(redis_server.url, database, DJANGO_SETTINGS_MODULE="tests.notifications.worker_settings")
        log = workers(env)
        producer = Celery("layout-test", broker=env["CELERY_BROKER_URL"], set_as_current=False)
        producer.conf.task_routes = settings.CELERY_TASK_ROUTES  # the project's routing, as beat sends it
        try:
            producer.send_task("notifications.dispatch")
            slow.wait_for(1, 60)
            (exchange,) = slow.exchanges
            producer.send_task("usage.flush")
            flushed = wait_until(lambda: "usage flush finished" in log(), 60, "the flush", log)
        finally:
            producer.close()
        assert exchange.ended is None, "the slow delivery ended before the flush could show it was not waiting"
        assert flushed - exchange.arrived < TIMEOUT
        assert len(receiver.requests) == 1  # the other endpoint's webhook, sent while the slow one trickled
        ended = wait_until(lambda: exchange.ended is not None, 30, "the slow delivery to end", log)
        assert not exchange.completed
        assert TIMEOUT - 0.5 < ended - exchange.arrived < TIMEOUT + 3, ended - exchange.arrived
    wait_until(lambda: delivery_row(database, slow_endpoint.pk)[2] == 1, 30, "the attempt to be recorded", log)
    status, failure, attempts, error = delivery_row(database, slow_endpoint.pk)
    assert (status, failure, attempts) == ("pending", "timeout", 1)
    assert f"deadline ({TIMEOUT:g} s)" in error
    assert delivery_row(database, fast_endpoint.pk)[:3] == ("succeeded", "", 1)


def test_the_documented_queue_and_workers_are_the_projects():
    """The notifications page's routing lines are the project's settings, and its two worker lines consume the
    queues the Procfile's worker and notifier do."""
    from tests.doc_blocks import doc_block

    scope: dict = {}
    exec(doc_block("notifications.md", "notifications-queue"), scope)
    assert scope["CELERY_TASK_ROUTES"] == settings.CELERY_TASK_ROUTES
    assert [q.name for q in scope["CELERY_TASK_QUEUES"]] == [q.name for q in settings.CELERY_TASK_QUEUES]
    documented = doc_block("notifications.md", "notifications-workers", "sh").splitlines()
    for line, name in zip(documented, ("worker", "notifier"), strict=True):
        queues = shlex.split(line)[shlex.split(line).index("--queues") + 1]
        shipped = procfile_command(name)
        assert shipped[shipped.index("--queues") + 1] == queues
