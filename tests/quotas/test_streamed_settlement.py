"""A streamed response is settled when its body ends, not when the view returns it.

LLM-style APIs answer with a ``StreamingHttpResponse`` whose generator learns the request's cost as it goes
and reports it (``request.quota_cost``) at its end. Its settlement (the actual cost charged in place of the
estimate, the concurrency lease ended) waits for the last byte, or for the response to be closed when the
client goes away first; a body that fails midway is settled as a failed request. The plan here: a day budget of
1.00, an estimate of 0.05 a stream, and one stream at a time (a lease of 30 s, so a leaked lease shows as a
429 on the next request).
"""

from __future__ import annotations

import asyncio
import http.client
import io
import threading
from decimal import Decimal
from urllib.parse import urlsplit

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.handlers.asgi import ASGIHandler
from django.http import FileResponse, StreamingHttpResponse
from django.test import AsyncClient
from django.urls import include, path
from rest_framework.test import APIClient
from rest_framework.views import APIView

from plans.models import CostBudget
from quotas.django.decorators import quota_limited
from quotas.engine import default_engine
from quotas.formats.money import to_micros
from quotas.http.settlement import settle_at_end
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key
from tests.usage_counters import usage_totals

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

#: Set by a real-server test: the stream waits on it between its first and its last chunk.
may_finish = threading.Event()


def tokens(request, cost: str = "0.30", wait: bool = False):
    """The body of a streamed answer: three chunks, then the actual cost, reported at the very end."""
    yield b"one "
    if wait:
        may_finish.wait(timeout=10)
    yield b"two "
    if request.GET.get("fail"):
        raise RuntimeError("the stream failed midway")
    yield b"three"
    request.quota_cost = Decimal(cost)


class StreamedView(APIView):
    """A DRF view answering with a stream (QuotaThrottle, the project's default): estimate 0.05, actual 0.30."""

    quota_scope = "stream"

    def get_quota_cost(self, request):
        return Decimal(request.query_params.get("est", "0.05"))

    def get(self, request):
        return StreamingHttpResponse(tokens(request, wait="wait" in request.query_params))


class PartlyStreamedView(StreamedView):
    """Reports what it generated in a ``finally`` block, so a client gone midway is charged that much."""

    def get(self, request):
        def body():
            try:
                yield b"one "
                yield b"two "
            finally:
                request.quota_cost = Decimal("0.10")

        return StreamingHttpResponse(body())


class DownloadView(StreamedView):
    """A file download: three blocks of 4096 bytes."""

    def get(self, request):
        return FileResponse(io.BytesIO(b"x" * 3 * 4096))


@quota_limited(scope="stream")
def streamed(request):
    """A plain Django view behind @quota_limited (the plan's price, 0.05, as the estimate): actual 0.30."""
    return StreamingHttpResponse(tokens(request))


@quota_limited(scope="stream")
async def astreamed(request):
    """An async view whose body is an async generator, reporting 0.30 at its end."""

    async def body():
        for chunk in tokens(request):
            yield chunk

    return StreamingHttpResponse(body())


@quota_limited(scope="stream")
async def astreamed_forever(request):
    """An async body that sends one chunk and then waits until its client goes away."""

    async def body():
        yield b"one "
        await asyncio.Event().wait()

    return StreamingHttpResponse(body())


urlpatterns = [
    path("drf/stream", StreamedView.as_view()),
    path("drf/partly", PartlyStreamedView.as_view()),
    path("drf/download", DownloadView.as_view()),
    path("deco/stream", streamed),
    path("deco/astream", astreamed),
    path("deco/astream-forever", astreamed_forever),
    path("", include("config.urls")),
]


@pytest.fixture
def key(db):
    """A subscriber of a plan pricing a stream at 0.05 (the estimate), with a day budget of 1.00 and one
    stream at a time."""
    plan = PlanFactory(slug="streamed")
    EndpointLimitFactory(plan=plan, name="stream", scope="stream", rates="1000/min", price=Decimal("0.05"))
    EndpointLimitFactory(plan=plan, name="inflight", scope="stream", rates="1/30s", algorithm="concurrency")
    CostBudget.objects.create(plan=plan, period="day", amount=Decimal("1"))
    return issue_key(plan=plan)


def read(response) -> bytes:
    """The whole body of a streamed test-client response (the test client then closes it, as a server does)."""
    return b"".join(response.streaming_content)


@pytest.mark.parametrize("url", ["/drf/stream", "/deco/stream"])
def test_a_stream_is_charged_the_cost_it_reports_at_its_end(url, key, redis_client):
    """Three streams reporting 0.30 each spend 0.90 of the 1.00 budget (not three estimates of 0.05): a
    fourth request estimated at 0.15 no longer fits."""
    api = APIClient()
    for _ in range(3):
        response = api.get(url, HTTP_X_API_KEY=key)
        assert response.status_code == 200
        assert "RateLimit-Policy" in response  # headers go out with the status line, before the body
        assert read(response) == b"one two three"
    assert usage_totals(redis_client)["c"] == to_micros(Decimal("0.90"))
    refused = api.get("/drf/stream?est=0.15", HTTP_X_API_KEY=key)
    assert refused.status_code == 429
    assert refused.json()["reason"] == "budget_exceeded"


@pytest.mark.parametrize("url", ["/drf/stream", "/deco/stream"])
def test_a_stream_holds_its_lease_until_its_last_byte(url, key):
    """With one stream at a time, a second request while the first body is still streaming is refused; once
    the body ended, the next one is admitted."""
    api = APIClient()
    first = api.get(url, HTTP_X_API_KEY=key)
    body = iter(first.streaming_content)
    assert next(body) == b"one "
    assert api.get(url, HTTP_X_API_KEY=key).status_code == 429  # mid-stream: the lease is held
    assert b"".join(body) == b"two three"
    second = api.get(url, HTTP_X_API_KEY=key)
    assert second.status_code == 200
    read(second)


def test_a_client_gone_mid_stream_gives_its_lease_back(key):
    """The server closes the response of a client that went away (response.close()): its lease ends then."""
    api = APIClient()
    first = api.get("/drf/stream", HTTP_X_API_KEY=key)
    assert next(iter(first.streaming_content)) == b"one "
    first.close()
    second = api.get("/drf/stream", HTTP_X_API_KEY=key)
    assert second.status_code == 200
    read(second)


def test_a_client_gone_mid_stream_is_charged_what_the_body_reported_when_closed(key, redis_client):
    """The body is closed before the request is settled: a cost it reports in a ``finally`` block counts."""
    api = APIClient()
    first = api.get("/drf/partly", HTTP_X_API_KEY=key)
    assert next(iter(first.streaming_content)) == b"one "
    first.close()
    assert usage_totals(redis_client)["c"] == to_micros(Decimal("0.10"))


def test_a_file_download_holds_its_lease_until_closed(key):
    """A FileResponse is settled when the response is closed, here by the test client once the file is read."""
    api = APIClient()
    first = api.get("/drf/download", HTTP_X_API_KEY=key)
    body = iter(first.streaming_content)
    assert len(next(body)) == 4096
    assert api.get("/drf/download", HTTP_X_API_KEY=key).status_code == 429
    assert len(b"".join(body)) == 2 * 4096
    second = api.get("/drf/download", HTTP_X_API_KEY=key)
    assert second.status_code == 200
    read(second)


def test_a_file_response_keeps_its_file_for_the_servers_file_wrapper():
    """Its body is not replaced, so a WSGI server may still send the file itself (wsgi.file_wrapper)."""
    response = FileResponse(io.BytesIO(b"x"))
    settle_at_end(response, [])
    assert response.file_to_stream is not None
    response.close()


def test_a_closed_stream_is_settled_once(key, redis_client):
    """A body read to its end and then closed (as every server does) is settled once: charged 0.30, not more."""
    api = APIClient()
    response = api.get("/drf/stream", HTTP_X_API_KEY=key)
    read(response)
    response.close()
    response.close()
    assert usage_totals(redis_client)["c"] == to_micros(Decimal("0.30"))


def test_a_stream_that_fails_midway_is_settled_as_a_failed_request(key, redis_client):
    """A body that raises after its headers went out is settled as a server error: its estimate released, its
    lease ended."""
    api = APIClient()
    response = api.get("/drf/stream?fail=1", HTTP_X_API_KEY=key)
    with pytest.raises(RuntimeError, match="midway"):
        read(response)
    assert usage_totals(redis_client).get("c", 0) == 0
    assert read(api.get("/drf/stream", HTTP_X_API_KEY=key)) == b"one two three"


def test_an_async_stream_is_charged_at_its_end_and_holds_its_lease(key, redis_client):
    """Under ASGI an async body is settled when it ends too: the lease held mid-stream, 0.30 charged."""

    async def scenario():
        client = AsyncClient()
        first = await client.get("/deco/astream", headers={"X-API-Key": key})
        body = aiter(first.streaming_content)
        assert await anext(body) == b"one "
        assert (await client.get("/deco/astream", headers={"X-API-Key": key})).status_code == 429
        assert [chunk async for chunk in body] == [b"two ", b"three"]
        second = await client.get("/deco/astream", headers={"X-API-Key": key})
        assert second.status_code == 200
        assert b"".join([chunk async for chunk in second.streaming_content]) == b"one two three"
        await default_engine.runtime().store.transport.aclose()

    async_to_sync(scenario)()
    assert usage_totals(redis_client)["c"] == to_micros(Decimal("0.60"))


def test_under_asgi_a_client_gone_mid_stream_gives_its_lease_back(key):
    """Django's ASGI handler cancels the sending of a body whose client disconnected, then closes the
    response: the lease held until then is released at once."""

    async def scenario():
        path = "/deco/astream-forever"
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"testserver"), (b"x-api-key", key.encode())], "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
        }  # fmt: skip
        communicator = ApplicationCommunicator(ASGIHandler(), scope)
        await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
        assert (await communicator.receive_output(timeout=10))["status"] == 200
        assert (await communicator.receive_output(timeout=10))["body"] == b"one "
        client = AsyncClient()
        assert (await client.get(path, headers={"X-API-Key": key})).status_code == 429  # the lease is held
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(timeout=10)
        assert (await client.get("/deco/astream", headers={"X-API-Key": key})).status_code == 200
        await default_engine.runtime().store.transport.aclose()

    async_to_sync(scenario)()


def test_over_a_real_server_the_lease_lasts_until_the_last_byte(key, live_server, redis_client):
    """Through a real WSGI server (Django's live server, a thread per request): while the first body waits
    between two chunks, a second request is refused; after its last byte the next one is admitted, and the
    reported cost counts."""
    may_finish.clear()
    address = urlsplit(live_server.url)

    def connect() -> http.client.HTTPConnection:
        return http.client.HTTPConnection(address.hostname, address.port, timeout=10)

    def status_of(path: str) -> int:
        connection = connect()
        try:
            connection.request("GET", path, headers={"X-API-Key": key})
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    first = connect()
    try:
        first.request("GET", "/drf/stream?wait=1", headers={"X-API-Key": key})
        streaming = first.getresponse()
        assert streaming.status == 200
        assert streaming.read(4) == b"one "  # the server sent the first chunk and waits
        assert status_of("/drf/stream") == 429
        may_finish.set()
        assert streaming.read() == b"two three"
    finally:
        may_finish.set()
        first.close()
    assert status_of("/drf/stream") == 200
    assert usage_totals(redis_client)["c"] == to_micros(Decimal("0.60"))
