"""The database signal on PostgreSQL: the connection pool's own statistics and the server's connections.

Run with DATABASE_URL=postgres://... (CI does); skipped without it, failed when QUOTAS_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from adaptive.controller import run_controller
from adaptive.load import CpuMeter, db_pool_saturation, db_server_saturation, host_sample
from adaptive.reporter import publish_sample
from tests.factories import PlanFactory
from tests.store_client import board_of
from tests.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("enforce")]


def pool_stats() -> dict[str, int]:
    return connection.pool.get_stats()


def exhausted_now(stats: dict[str, int]) -> bool:
    return (
        stats.get("pool_size") == stats["pool_max"]
        and stats["pool_available"] == 0
        and stats.get("requests_waiting", 0) >= 1
    )


@pytest.mark.django_db(transaction=True)
def test_exhausted_pool_raises_the_db_signal_and_cuts(redis_client) -> None:
    """Threads holding every pooled connection (and more waiting) push the pool signal to 1.0, and the
    controller cuts on it; released, the signal falls back."""
    free = PlanFactory(slug="free", priority=0)
    before = db_pool_saturation()
    release = threading.Event()

    def borrow() -> None:
        connection.ensure_connection()  # a connection of this thread, from the shared pool
        release.wait(20)
        connection.close()  # back to the pool

    size = pool_stats()["pool_max"]
    threads = [threading.Thread(target=borrow) for _ in range(size + 2)]
    for thread in threads:
        thread.start()
    try:
        # Exhausted: the pool grown to its maximum (it opens connections in the background, one at a time), every
        # one of them taken, and a thread waiting. A waiter alone is not enough: while the pool grows, its first
        # connections taken and a waiter are 0.4 of it (a run on 2026-11-30).
        exhausted = wait_until(lambda: exhausted_now(pool_stats()), 10)
        assert exhausted, pool_stats()
        during = db_pool_saturation()
        sample = host_sample(CpuMeter())
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=20)
    after = db_pool_saturation()
    assert before < 0.5
    assert during == 1.0
    assert sample["db"] == 1.0
    assert after < 0.5

    sample["cpu"] = 0.1  # only the database is saturated
    publish_sample(board_of(redis_client), sample, ttl=5)
    outcome = run_controller(board_of(redis_client), now=time.time())
    assert outcome.reason.startswith("cut: db 1.00 >= critical")
    assert outcome.multipliers[free.pk] < 1.0


@pytest.mark.django_db
def test_server_connections_raise_the_db_signal() -> None:
    """Holding connections outside any pool raises connections in use against max_connections."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int"
        )
        (usable,) = cursor.fetchone()
    before = db_server_saturation()
    s = connection.settings_dict
    params = {"dbname": s["NAME"], "user": s["USER"], "password": s["PASSWORD"], "host": s["HOST"], "port": s["PORT"]}
    held = [psycopg.connect(**{k: v for k, v in params.items() if v}) for _ in range(10)]
    try:
        during = db_server_saturation()
    finally:
        for conn in held:
            conn.close()
    assert 0 < before < 1
    assert during - before >= 8 / usable  # other clients of a shared server may come and go


@pytest.mark.django_db
def test_controller_measures_the_server_without_any_host(redis_client) -> None:
    """With DB_SERVER_SIGNAL on, the controller reads the server itself: a db value even with no host reporting."""
    PlanFactory(slug="free")
    outcome = run_controller(board_of(redis_client), now=time.time())
    assert 0 < outcome.signals["observed"]["db"] < 1
    assert outcome.signals["hosts"] == 0
