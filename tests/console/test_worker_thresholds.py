"""A customer's own 50 % threshold and its spending cap, end to end through the shipped workers: requests spend
through the throttle until the cap refuses one; the Procfile's worker runs the watcher (twice) and its notifier
delivers to a real receiver exactly one event per budget, period and threshold."""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import Decimal

import pytest
from celery import Celery
from django.conf import settings
from django.db import connections
from rest_framework.test import APIClient

from notifications.models import Endpoint
from notifications.secrets import encrypt, new_secret
from plans.models import AlertThresholds, CostBudget, SpendCap
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, issue_key
from tests.notifications.test_worker_layout import wait_until, workers  # noqa: F401  (the Procfile's workers)
from tests.usage.processes import WorkerDatabase, process_env

pytestmark = [pytest.mark.urls("tests.urls")]


def finished(log, task: str) -> int:
    """How many runs of ``task`` the workers' log says succeeded."""
    return len(re.findall(rf"Task {re.escape(task)}\[[^\]]+\] succeeded", log()))


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.django_db(transaction=True)
def test_a_threshold_and_a_cap_each_make_one_event_per_period(redis_server, receiver, workers, tmp_path):  # noqa: F811
    plan = PlanFactory(slug="metered")
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.06"))
    subscription = SubscriptionFactory(name="Acme", plan=plan)
    SpendCap.objects.create(subscription=subscription, period="day", amount=Decimal("0.04"))
    AlertThresholds.objects.create(subscription=subscription, percents=[50])
    Endpoint.objects.create(subscription=subscription, url=receiver.url, events=[],
                            secret_encrypted=encrypt(new_secret()))  # fmt: skip
    key = issue_key(subscription)
    client = APIClient()
    statuses = [client.get("/t/priced", HTTP_X_API_KEY=key) for _ in range(5)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 200, 429]
    assert statuses[-1].json()["reason"] == "spend_cap_reached"

    database = WorkerDatabase(tmp_path)
    database.publish()
    connections.close_all()
    env = process_env(redis_server.url, database, DJANGO_SETTINGS_MODULE="tests.notifications.worker_settings")
    log = workers(env)
    producer = Celery("thresholds-test", broker=env["CELERY_BROKER_URL"], set_as_current=False)
    producer.conf.task_routes = settings.CELERY_TASK_ROUTES  # the project's routing, as beat sends it
    try:
        for run in (1, 2):  # one after the other: the second look finds everything recorded already
            producer.send_task("notifications.watch")
            wait_until(lambda run=run: finished(log, "notifications.watch") >= run, 60, "the watcher", log)
        for run in range(1, 6):  # a run sends what is due when it starts; the next finds anything left
            producer.send_task("notifications.dispatch")
            wait_until(lambda run=run: finished(log, "notifications.dispatch") >= run, 60, "the dispatcher", log)
            if len(receiver.requests) >= 4:
                break
        producer.send_task("notifications.dispatch")  # nothing left to send
        wait_until(lambda: finished(log, "notifications.dispatch") > run, 60, "the last dispatch", log)
    finally:
        producer.close()
    events = Counter()
    for request in receiver.requests:
        body = json.loads(request.body)
        events[(body["type"], body["data"]["budget"], body["data"]["threshold"])] += 1
    assert events == {
        ("budget.threshold_crossed", "day-cap", 80): 1,  # the decision's own alerts, on the cap it enforces
        ("budget.threshold_crossed", "day-cap", 100): 1,
        ("spend.threshold_reached", "day-cap", 50): 1,  # the customer's 50 %: of its cap (0.02 of 0.04) ...
        ("spend.threshold_reached", "day-budget", 50): 1,  # ... and of the plan's budget (0.04 of 0.06)
    }
