"""Every front door settles a decision whatever the view does, sync and async.

A view that raises, and an async view cancelled because its client went away, give back their concurrency
lease at once (and release their estimate), through ``@quota_limited``, ``PathQuotaMiddleware`` and a DRF view
(QuotaThrottle, settled by QuotaHeadersMiddleware) alike. The
lease here is "one request at a time for 30 s": a leaked lease shows as a 429 on the next request. A refusal
by a concurrency limit is not remembered in the process either: it ends as soon as a lease is released.
"""

from __future__ import annotations

import asyncio
import threading
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpResponse
from django.test import AsyncClient, Client
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from plans.models import Plan
from quotas.django.decorators import quota_limited
from quotas.engine import default_engine
from quotas.formats.money import to_micros
from tests.factories import EndpointLimitFactory, PlanFactory
from tests.usage_counters import usage_totals

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

#: Set by a view that waits to be cancelled, once it runs (the test then disconnects its client).
view_started: asyncio.Event | None = None


def raising(request):
    raise RuntimeError("the view failed")


async def async_raising(request):
    raise RuntimeError("the async view failed")


async def waits_forever(request):
    assert view_started is not None
    view_started.set()
    await asyncio.Event().wait()  # until the client goes away and Django cancels the view
    return HttpResponse("never")


def ok(request):
    return HttpResponse("ok")


#: Set by the test once its client went away, so that the DRF view (sync, in a worker thread) can end.
drf_view_may_end = threading.Event()


class HeldDrfView(APIView):
    """A DRF view of scope "held" (QuotaThrottle, the project's default) that runs until the test lets it end."""

    quota_scope = "held"

    def get(self, request):
        view_started_threadsafe.set()
        drf_view_may_end.wait(timeout=10)
        return Response({"ok": True})


class OkDrfView(APIView):
    quota_scope = "held"

    def get(self, request):
        return Response({"ok": True})


#: Set by the DRF view once it runs (a threading event: the view runs in asgiref's worker thread).
view_started_threadsafe = threading.Event()


async def async_ok(request):
    return HttpResponse("ok")


class MisreportingDrfView(APIView):
    """Estimates 0.05 and then reports ?actual= as its cost (out of bounds in the tests: the view's bug)."""

    quota_scope = "held"

    def get_quota_cost(self, request):
        return Decimal("0.05")

    def get(self, request):
        request.quota_cost = Decimal(request.query_params["actual"])
        return Response({"ok": True})


def misreporting(request):
    request.quota_cost = Decimal(request.GET["actual"])
    return HttpResponse("ok")


async def async_misreporting(request):
    request.quota_cost = Decimal(request.GET["actual"])
    return HttpResponse("ok")


urlpatterns = [
    path("deco/raising", quota_limited(scope="held")(raising)),
    path("deco/async-raising", quota_limited(scope="held")(async_raising)),
    path("deco/waits", quota_limited(scope="held")(waits_forever)),
    path("deco/ok", quota_limited(scope="held")(ok)),
    path("deco/async-ok", quota_limited(scope="held")(async_ok)),
    path("held/raising", raising),
    path("held/async-raising", async_raising),
    path("held/waits", waits_forever),
    path("held/ok", ok),
    path("held/async-ok", async_ok),
    path("drf/waits", HeldDrfView.as_view()),
    path("drf/ok", OkDrfView.as_view()),
    path("drf/misreporting", MisreportingDrfView.as_view()),
    path("deco/misreporting", quota_limited(scope="held")(misreporting)),
    path("deco/async-misreporting", quota_limited(scope="held")(async_misreporting)),
]


@pytest.fixture(autouse=True)
def one_at_a_time(settings):
    """The default plan lets one request of scope "held" run at a time (a lease of 30 s); PathQuotaMiddleware
    limits /held/ with that scope."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="inflight", scope="held", rates="1/30s", algorithm="concurrency")
    settings.QUOTAS = {**settings.QUOTAS, "PATH_LIMITS": [{"prefix": "/held/", "scope": "held"}]}
    # Only middleware that runs async, so that under ASGI the chain is async all the way (one sync-only
    # middleware would put PathQuotaMiddleware on its sync path).
    settings.MIDDLEWARE = [
        "django.middleware.common.CommonMiddleware",
        "quotas.middleware.QuotaHeadersMiddleware",
        "quotas.django.middleware.PathQuotaMiddleware",
    ]


@pytest.mark.parametrize("door", ["deco", "held"])
def test_a_sync_view_that_raises_gives_its_lease_back(door):
    client = Client(raise_request_exception=False)
    assert client.get(f"/{door}/raising").status_code == 500
    assert client.get(f"/{door}/ok").status_code == 200  # the lease was released: not 429


@pytest.mark.parametrize("door", ["deco", "held"])
def test_an_async_view_that_raises_gives_its_lease_back(door):
    async def scenario():
        client = AsyncClient(raise_request_exception=False)
        assert (await client.get(f"/{door}/async-raising")).status_code == 500
        assert (await client.get(f"/{door}/async-ok")).status_code == 200
        await default_engine.runtime().store.transport.aclose()

    async_to_sync(scenario)()


@pytest.mark.parametrize("door", ["deco", "held"])
def test_an_async_view_whose_client_went_away_gives_its_lease_back(door):
    """Under ASGI, a client that disconnects mid-request gets its view cancelled (a CancelledError, which is
    not an Exception): the lease is still released at once."""

    async def scenario():
        global view_started
        view_started = asyncio.Event()
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": f"/{door}/waits", "raw_path": f"/{door}/waits".encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
        }  # fmt: skip
        communicator = ApplicationCommunicator(ASGIHandler(), scope)
        await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
        await asyncio.wait_for(view_started.wait(), timeout=10)
        client = AsyncClient(raise_request_exception=False)  # the same address: the same client
        assert (await client.get(f"/{door}/async-ok")).status_code == 429  # while the first one runs
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(timeout=10)
        assert (await client.get(f"/{door}/async-ok")).status_code == 200
        await default_engine.runtime().store.transport.aclose()

    async_to_sync(scenario)()


@pytest.mark.slow  # waits 0.1 s for Django's cancellation, see below
def test_a_drf_view_whose_client_went_away_gives_its_lease_back():
    """Under ASGI, QuotaHeadersMiddleware settles the throttle's verdict when the request is cancelled: the
    sync view may still be running in its thread, but its client is gone and its lease is released."""

    async def scenario():
        view_started_threadsafe.clear()
        drf_view_may_end.clear()
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": "/drf/waits", "raw_path": b"/drf/waits", "query_string": b"", "root_path": "",
            "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
        }  # fmt: skip
        communicator = ApplicationCommunicator(ASGIHandler(), scope)
        await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
        assert await asyncio.to_thread(view_started_threadsafe.wait, 10), "the view never started"
        client = AsyncClient(raise_request_exception=False)
        assert (await client.get("/drf/ok")).status_code == 429  # while the first one runs
        await communicator.send_input({"type": "http.disconnect"})
        # Django cancels the request while the view's own thread goes on; nothing signals when the cancellation
        # has landed (the verdict settled), so the view is let end a moment later: no clock of ours to move.
        await asyncio.sleep(0.1)
        drf_view_may_end.set()
        await communicator.wait(timeout=10)
        assert (await client.get("/drf/ok")).status_code == 200
        await default_engine.runtime().store.transport.aclose()

    try:
        async_to_sync(scenario)()
    finally:
        drf_view_may_end.set()


@pytest.mark.parametrize("url", ["/drf/misreporting", "/deco/misreporting"])
@pytest.mark.parametrize("actual", ["-1", "100.01"])
def test_a_view_reporting_a_cost_out_of_bounds_is_answered_settled_and_released(url, actual, settings, redis_client):
    """The view's bug, found after it ran: a clear 500 problem naming the view's value, the request settled as
    any failed request (its estimate released, nothing charged) and its lease ended (the next request is
    admitted, not refused for 30 s)."""
    settings.QUOTAS = {**settings.QUOTAS, "MAX_REQUEST_COST": 100}
    EndpointLimitFactory(plan=Plan.objects.get(slug="free"), name="priced", scope="held", price=Decimal("0.05"))
    client = Client(raise_request_exception=False)
    response = client.get(f"{url}?actual={actual}")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["reason"] == "invalid_reported_cost"
    assert problem["type"].endswith("invalid-reported-cost")
    assert f"Decimal('{actual}')" in problem["detail"]
    assert usage_totals(redis_client).get("c", 0) == 0  # the estimate is not kept
    admitted = client.get(f"{url}?actual=0.02")
    assert admitted.status_code == 200
    assert usage_totals(redis_client)["c"] == to_micros(Decimal("0.02"))


def test_an_async_view_reporting_a_cost_out_of_bounds_is_answered_and_released():
    async def scenario():
        client = AsyncClient(raise_request_exception=False)
        response = await client.get("/deco/async-misreporting?actual=-1")
        assert (response.status_code, response.json()["reason"]) == (500, "invalid_reported_cost")
        assert (await client.get("/deco/async-misreporting?actual=0")).status_code == 200
        await default_engine.runtime().store.transport.aclose()

    async_to_sync(scenario)()
