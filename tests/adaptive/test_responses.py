"""Each response's time and status as LoadReporterMiddleware records them, and what the reporter makes of an
interval (adaptive/middleware.py, responses.py): real requests through the project's middleware."""

from __future__ import annotations

import json

import pytest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import Client
from django.urls import path

from adaptive import store
from adaptive.reporter import publish_sample
from adaptive.responses import RESPONSES, drain, interval_signals
from tests.store_client import board_of


def ok(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ok": True})


def broken(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug in the view")


def unavailable(request: HttpRequest) -> HttpResponse:
    return HttpResponse(status=503)


def refused(request: HttpRequest) -> HttpResponse:
    return HttpResponse(status=429)


urlpatterns = [path("ok", ok), path("broken", broken), path("unavailable", unavailable), path("refused", refused)]

pytestmark = pytest.mark.urls(__name__)


@pytest.fixture
def browser() -> Client:
    """A client that gets Django's 500 page, as a user would, instead of the view's exception."""
    drain()  # what earlier tests' requests left
    return Client(raise_request_exception=False)


def test_every_response_is_recorded_with_its_status(browser) -> None:
    """One entry per request: the status the user got (a view's exception as 500) and a time >= 0."""
    assert browser.get("/ok").status_code == 200
    assert browser.get("/broken").status_code == 500
    assert browser.get("/unavailable").status_code == 503
    recorded = drain()
    assert [status for _, status in recorded] == [200, 500, 503]
    assert all(seconds >= 0 for seconds, _ in recorded)
    assert len(RESPONSES) == 0


def test_an_interval_reports_its_5xx_share_and_p90_against_the_targets(browser, set_quotas) -> None:
    """16 successes, 2 refusals (429 is the client's, not an error) and 2 server errors: 10 % of responses
    5xx, 10.0 against a 1 % target; the p90 is a time of this interval in ms, over LATENCY_TARGET_MS."""
    set_quotas("ADAPTIVE", ERROR_RATE_TARGET=0.01, LATENCY_TARGET_MS=250.0, MIN_RESPONSES=20)
    for route in ["/ok"] * 16 + ["/refused"] * 2 + ["/broken", "/unavailable"]:
        browser.get(route)
    fields = interval_signals()
    assert fields["error_rate"] == 0.1
    assert fields["errors"] == 10.0
    assert fields["latency_ms"] >= 0
    assert fields["latency"] == pytest.approx(fields["latency_ms"] / 250.0, abs=1e-4)
    assert interval_signals()["latency"] is None  # drained: the next interval has had no request yet


def test_a_quiet_interval_reports_nothing(browser, set_quotas) -> None:
    """Fewer responses than MIN_RESPONSES: neither latency nor errors, even if every one failed."""
    set_quotas("ADAPTIVE", MIN_RESPONSES=5)
    for _ in range(4):
        browser.get("/broken")
    assert interval_signals() == {"latency_ms": None, "latency": None, "error_rate": None, "errors": None}


def test_the_published_sample_carries_the_response_fields(browser, redis_client, set_quotas) -> None:
    """What the reporter thread publishes for the controller: the host sample with the interval's fields."""
    set_quotas("ADAPTIVE", MIN_RESPONSES=1)
    browser.get("/unavailable")
    sample = {"host": "web1", "pid": 1, "at": 0.0, "cpu": 0.1, "memory": 0.2, "db": None, **interval_signals()}
    publish_sample(board_of(redis_client), sample, ttl=5)
    published = json.loads(redis_client.get(store.host_key("web1", 1)))
    assert (published["error_rate"], published["errors"]) == (1.0, 100.0)
