"""Budget alerts outlive the request's transaction (issue 44, item 5), on PostgreSQL under ATOMIC_REQUESTS.

Redis stores a threshold as reported when the request reaches it, so a row the request's rollback took with it
would never be written: the alert is recorded apart from the request's transaction. Run with
DATABASE_URL=postgres://... (CI does); skipped without it, failed when QUOTAS_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.db import connection
from django.http import JsonResponse
from django.test import Client
from django.urls import include, path
from rest_framework.test import APIClient

from notifications.events import BUDGET_THRESHOLD
from notifications.models import Event
from plans.models import CostBudget, Subscription
from quotas.django.decorators import quota_limited
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.waiting import wait_until
from usage.models import BudgetAlert

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]


@quota_limited(scope="locking")
def locking(request):
    """A plain view that locks its subscription's row until its transaction ends (a billing view might)."""
    Subscription.objects.select_for_update().get(pk=request.GET["subscription"])
    return JsonResponse({"ok": True})


urlpatterns = [path("", include("tests.urls")), path("f/locking", locking)]


@pytest.fixture
def atomic_requests(monkeypatch) -> None:
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)


def test_alerts_of_requests_that_roll_back_are_recorded_once_as_the_spend_crosses(atomic_requests):
    """0.01 a request, 0.05 a day, 60 % spent. A request that would reach 80 % fails (500, rolled back): its
    estimate is released and nothing is recorded. One that ends in DRF's ValidationError (400, rolled back) is
    charged and reaches 80 %: recorded. A request the budget then refuses (429, rolled back) reports 100 %:
    recorded. The events are exactly [80, 100], each with the 0.04 spent."""
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="priced", scope="priced", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.05"))
    key = issue_key(plan=plan)
    client = APIClient(raise_request_exception=False)

    def get(query: str = "") -> int:
        return client.get(f"/t/priced?{query}", HTTP_X_API_KEY=key).status_code

    assert [get() for _ in range(3)] == [200] * 3
    assert get("fail=1") == 500
    assert not Event.objects.exists()
    assert get("invalid=1") == 400
    assert get("est=0.02") == 429

    events = Event.objects.filter(type=BUDGET_THRESHOLD).order_by("data__threshold")
    assert [(e.data["threshold"], e.data["spent"]) for e in events] == [(80, "0.040000"), (100, "0.040000")]
    alerts = BudgetAlert.objects.order_by("threshold")
    assert [(a.threshold, a.spent) for a in alerts] == [(80, Decimal("0.04")), (100, Decimal("0.04"))]


def test_an_alert_whose_row_the_request_has_locked_is_recorded_after_the_request(atomic_requests):
    """The view holds its subscription FOR UPDATE when its settling (inside ATOMIC_REQUESTS) crosses 80 % and
    100 %: the rows that name the subscription wait for the request's transaction. The request is answered
    after a short wait, not never, and the events are recorded once it has committed."""
    plan = PlanFactory(slug="metered", is_default=True)
    EndpointLimitFactory(plan=plan, name="locking", scope="locking", rates="1000/min", price=Decimal("0.01"))
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("0.01"))
    key = issue_key(plan=plan)
    subscription = Subscription.objects.get(plan=plan)
    started = time.monotonic()
    response = Client().get(f"/f/locking?subscription={subscription.pk}", HTTP_X_API_KEY=key)
    assert response.status_code == 200
    assert time.monotonic() - started < 10
    wait_until(lambda: Event.objects.count() >= 2, 10)
    events = Event.objects.filter(type=BUDGET_THRESHOLD).order_by("data__threshold")
    assert [(e.data["threshold"], e.data["spent"]) for e in events] == [(80, "0.010000"), (100, "0.010000")]
