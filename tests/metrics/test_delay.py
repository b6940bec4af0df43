"""Through gunicorn with 2 workers: a decision reaches /metrics within the documented delay, whichever worker
made it and whichever serves the scrape (docs/operations.md, "How soon /metrics counts a decision").

A worker counts its decisions in the shared files when its ledger is folded (quotas/observability/ledger.py);
a scrape folds only the ledger of the worker that serves it, so the other's decisions must reach the files on
their own, within :data:`~quotas.observability.ledger.METRICS_DELAY`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from demo.seed import demo_key
from quotas.observability.ledger import METRICS_DELAY

from .test_multiprocess import Gunicorn, running_gunicorn, send

TRIES = 20
N = 8

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def counted(server: Gunicorn) -> tuple[float, float]:
    """One scrape's allowed decisions of the enterprise plan, and its count of allowed decisions' durations."""
    status, body = server.get("/metrics")
    assert status == 200, body
    decisions = durations = 0.0
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "quota_decisions_total" and sample.labels["plan"] == "enterprise":
                decisions += sample.value
            elif sample.name == "quota_decision_seconds_count" and sample.labels["outcome"] == "allowed":
                durations += sample.value
    return decisions, durations


@pytest.fixture(scope="module")
def two_workers(redis_server, tmp_path_factory, sqlite_templates) -> Iterator[Gunicorn]:
    with running_gunicorn(redis_server.url, tmp_path_factory.mktemp("gunicorn-delay"), 2, sqlite_templates) as server:
        yield server


def test_decisions_reach_metrics_within_the_documented_delay(two_workers):
    """N throttled requests between two scrapes read back as exactly N decisions and N durations,
    METRICS_DELAY after the last reply, in every one of 20 tries, the requests spread over both workers.

    Before the fix a worker folded its ledger at its poller's tick (a second and the tick's work apart) or
    when it served the scrape itself: half a second after, the other worker's decisions were missing, and
    the next try's count had them on top of its own (0, then 14 for 8).
    """
    key = demo_key("enterprise")  # never refused: every request is one allowed decision
    seen, served_by = [], set()
    for _ in range(TRIES):
        before = counted(two_workers)
        replies = send(two_workers, "/t/metrics/ping", N, {"X-API-Key": key})
        assert [status for status, _ in replies] == [200] * N
        served_by |= {json.loads(body)["pid"] for _, body in replies}
        time.sleep(METRICS_DELAY)
        after = counted(two_workers)
        seen.append((after[0] - before[0], after[1] - before[1]))
    assert len(served_by) == 2, "one worker served every request: nothing was read across workers"
    assert seen == [(N, N)] * TRIES
