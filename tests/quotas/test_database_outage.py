"""The database goes away while the rules snapshot is stale: requests are still decided, never a 500.

Runs against the session's PostgreSQL (CI), whose test database is made to
refuse every connection (ALLOW_CONNECTIONS false, existing sessions
terminated): to the application, the database is down.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection, connections
from rest_framework.test import APIClient

from plans.models import EndpointLimit
from quotas import metrics
from quotas.engine import default_engine
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.urls("tests.urls")]


#: How long a request that meets the outage waits for a pooled connection before it fails: the pool's timeout,
#: DB_POOL_TIMEOUT (10 s by default), shortened for these tests, where every outage makes one request wait it out.
#: Kept above the 2 s within which the request after it must answer, so a second wait would still fail that.
OUTAGE_POOL_TIMEOUT = 3.0


@pytest.fixture
def short_pool_timeout() -> Iterator[None]:
    """The database pool rebuilt with :data:`OUTAGE_POOL_TIMEOUT` for the test, then with the session's again."""
    options = connection.settings_dict["OPTIONS"]
    pool = options.get("pool")
    if not isinstance(pool, dict):  # no pool (not PostgreSQL): the test skips anyway
        yield
        return
    connections.close_all()
    connection.close_pool()
    options["pool"] = {**pool, "timeout": OUTAGE_POOL_TIMEOUT}
    try:
        yield
    finally:
        connections.close_all()
        connection.close_pool()
        options["pool"] = pool


@pytest.fixture
def database_outage(short_pool_timeout: None) -> Iterator[contextlib.AbstractContextManager]:
    """A context manager: inside it, the test database accepts no connection at all (a request that meets it
    waits :data:`OUTAGE_POOL_TIMEOUT` for a connection)."""
    params = connection.get_connection_params()
    name = connection.settings_dict["NAME"]
    admin_params = {k: v for k, v in params.items() if k in ("host", "port", "user", "password")}

    def admin() -> psycopg.Connection:
        return psycopg.connect(dbname="postgres", autocommit=True, **admin_params)

    @contextlib.contextmanager
    def outage() -> Iterator[None]:
        connections.close_all()
        with admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
        try:
            yield
        finally:
            with admin() as conn:
                conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            connections.close_all()

    return outage


@pytest.mark.django_db(transaction=True)
def test_a_stale_snapshot_is_served_while_the_database_is_down(database_outage, set_quotas):
    set_quotas("METRICS", TOKEN="ops-token")
    plan = PlanFactory(slug="free", is_default=True)
    # Per day: the request that meets the outage may wait for the database pool's timeout, and a
    # per-minute window could roll over meanwhile.
    EndpointLimitFactory(plan=plan, name="global", rates="3/day", algorithm="fixed_window")
    key = issue_key(plan=plan)
    api = APIClient(raise_request_exception=False)
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=key)["X-RateLimit-Limit"] == "3"  # rules and key cached
    EndpointLimit.objects.filter(plan=plan).update(rates="5/day")
    default_engine.runtime().rules.invalidate()  # as the admin's save does: every process reloads on its next request
    failures = metrics.REGISTRY.get_sample_value("quota_rules_load_failures_total") or 0

    with database_outage():
        codes = []
        for _ in range(4):
            response = api.get("/api/demo/ping", HTTP_X_API_KEY=key)
            codes.append(response.status_code)
        health = api.get("/healthz", HTTP_AUTHORIZATION="Bearer ops-token")
        anonymous = api.get("/healthz").json()

    assert codes == [200, 200, 429, 429]  # the last good snapshot (3/day) decided, in Redis
    assert metrics.REGISTRY.get_sample_value("quota_rules_load_failures_total") >= failures + 1
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    assert health.json()["rules"]["state"] == "stale"
    assert "OperationalError" in health.json()["rules"]["last_error"]
    assert anonymous == {"status": "degraded", "engine": {"mode": "normal", "failure_mode": "local"}}

    # The poller retries, backing off (1, 2, 4 ... s); each failed attempt also drops a connection the
    # outage broke. Within a few retries of the database's return, the new rules are in force.
    fresh = wait_until(lambda: api.get("/api/demo/ping", HTTP_X_API_KEY=key).get("X-RateLimit-Limit") == "5", 40, 0.25)
    assert fresh, "the new rules were not in force within 40 s of the database's return"
    assert api.get("/healthz", HTTP_AUTHORIZATION="Bearer ops-token").json()["rules"]["state"] == "ok"


def assert_unavailable_problem(response) -> None:
    assert response.status_code == 503
    assert response["Content-Type"] == "application/problem+json"
    assert 1 <= int(response["Retry-After"]) <= 30
    assert response.json()["reason"] == "rules_unavailable"


@pytest.mark.django_db(transaction=True)
def test_an_api_key_not_cached_yet_gets_503_while_the_database_is_down(database_outage):
    """The snapshot is loaded, but this key was never looked up: 503 with Retry-After, never a 500; the keys
    this process already knows keep working."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/day", algorithm="fixed_window")
    known, unseen = issue_key(plan=plan), issue_key(plan=plan)
    api = APIClient(raise_request_exception=False)
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=known).status_code == 200

    with database_outage():
        assert_unavailable_problem(api.get("/api/demo/ping", HTTP_X_API_KEY=unseen))
        # The next one answers at once (the failure started the backoff), with the same problem.
        started = time.monotonic()
        assert_unavailable_problem(api.get("/api/demo/ping", HTTP_X_API_KEY=unseen))
        assert time.monotonic() - started < 2
        assert api.get("/api/demo/ping", HTTP_X_API_KEY=known).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_worker_started_while_the_database_is_down_answers_503_then_recovers(database_outage):
    """A fresh process whose first rules load fails has nothing to decide with: 503 + Retry-After on DRF views,
    plain Django views and the client usage page; once the database is back, requests are decided."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="100/day", algorithm="fixed_window")
    key = issue_key(plan=plan)
    api = APIClient(raise_request_exception=False)
    with database_outage():
        default_engine.reset()  # what a worker started now knows: nothing
        assert_unavailable_problem(api.get("/api/demo/ping", HTTP_X_API_KEY=key))
        assert_unavailable_problem(api.get("/api/demo/ping"))
        assert_unavailable_problem(api.get("/t/plain-search"))

    def answered() -> int | None:
        status = api.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code
        return None if status == 503 else status

    assert wait_until(answered, 40, every=0.25) == 200
