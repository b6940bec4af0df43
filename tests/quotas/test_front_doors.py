"""Every front door means the same thing by the same words, and offers what adopters reach for.

The DRF throttle, ``@quota_limited`` and ``PATH_LIMITS`` count a rate string alike; ``throttle_scope`` selects
plan limits; the decorator takes ``key=``, ``method=``, ``block=False`` and lets the view's exceptions propagate;
``QUOTAS['ENABLED']`` and :func:`quotas.api.reset` serve a project's tests; QuotaHeadersMiddleware runs async.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.test import AsyncClient, Client
from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView

from plans.models import Plan
from quotas.api import reset
from quotas.contract.keys import is_usage_key
from quotas.django.decorators import quota_limited
from quotas.engine import default_engine
from quotas.exceptions import ResetNotConfirmed
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


class SameRateView(APIView):
    throttle_scope = "same"

    def get(self, request):
        return Response({"ok": True})


class ScopedSearchView(APIView):
    throttle_scope = "search"

    def get(self, request):
        return Response({"ok": True})


@quota_limited(rate="3/min")
def same_rate(request):
    return HttpResponse("ok")


@quota_limited(rate="3/min")
def writes_then_raises(request):
    Plan.objects.create(slug="made-by-a-failing-view", name="Made by a failing view")
    raise RuntimeError("the view failed after writing")


@quota_limited(rate="2/min", key="header:X-Tenant")
def per_tenant(request):
    return HttpResponse("ok")


@quota_limited(rate="2/min", key=lambda request: request.GET.get("account"))
def per_account(request):
    return HttpResponse("ok")


@quota_limited(rate="1/min", method="POST")
def posts_only(request):
    return HttpResponse("ok")


@quota_limited(rate="1/min", block=False)
def marks_only(request):
    return JsonResponse({"limited": request.limited})


@quota_limited(rate="1/min")
def first_view(request):
    return HttpResponse("ok")


@quota_limited(rate="1/min")
def second_view(request):
    return HttpResponse("ok")


def plain(request):
    return HttpResponse("plain")


async def async_plain(request):
    return HttpResponse("async plain")


urlpatterns = [
    path("", include("tests.urls")),
    path("f/drf-same", SameRateView.as_view()),
    path("f/search", ScopedSearchView.as_view()),
    path("f/same", same_rate),
    path("f/atomic", writes_then_raises),
    path("f/tenant", per_tenant),
    path("f/account", per_account),
    path("f/posts", posts_only),
    path("f/marks", marks_only),
    path("f/first", first_view),
    path("f/second", second_view),
    path("prefixed/same", plain),
    path("f/async", async_plain),
]


@pytest.fixture
def same_rates(settings):
    """The same string, "3/min", in DRF's settings, on a decorator, and on a PATH_LIMITS prefix; no plans."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"same": "3/min"},
    }
    settings.QUOTAS = {
        **settings.QUOTAS,
        "PATH_LIMITS": [{"prefix": "/prefixed/", "scope": "prefixed", "rate": "3/min"}],
    }
    middleware = list(settings.MIDDLEWARE)
    after = middleware.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1
    settings.MIDDLEWARE = [*middleware[:after], "quotas.django.middleware.PathQuotaMiddleware", *middleware[after:]]


def fourth_retry_after(url: str) -> int:
    client = Client(REMOTE_ADDR="198.51.100.40")
    assert [client.get(url).status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get(url)
    assert refused.status_code == 429
    return int(refused["Retry-After"])


def test_the_same_rate_string_means_the_same_in_every_front_door(same_rates):
    """ "3/min" is DRF's meaning everywhere (at most 3 in any rolling minute): the fourth request waits for the
    first to leave the window, about 60 s, not a token bucket's 20 s."""
    waits = [fourth_retry_after(url) for url in ("/f/drf-same", "/f/same", "/prefixed/same")]
    assert all(55 <= wait <= 60 for wait in waits), waits
    assert max(waits) - min(waits) <= 1


def test_throttle_scope_selects_plan_limits_scoped_alike(db):
    """A plan limit scoped "search" applies to a DRF view with throttle_scope = "search", as a DRF user expects."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="search", scope="search", rates="2/min", algorithm="fixed_window")
    client = Client(REMOTE_ADDR="198.51.100.41")
    assert [client.get("/f/search").status_code for _ in range(3)] == [200, 200, 429]
    assert client.get("/f/search")["RateLimit-Policy"] == '"search";q=2;w=60'


def test_an_exception_in_a_decorated_view_rolls_back_its_writes_under_atomic_requests(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)
    with pytest.raises(RuntimeError, match="after writing"):
        Client().get("/f/atomic")
    assert not Plan.objects.filter(slug="made-by-a-failing-view").exists()
    assert Client(raise_request_exception=False).get("/f/atomic").status_code == 500


def test_key_counts_per_header_value_or_per_callable_value():
    client = Client(REMOTE_ADDR="198.51.100.42")
    codes = [client.get("/f/tenant", HTTP_X_TENANT="acme").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    assert client.get("/f/tenant", HTTP_X_TENANT="globex").status_code == 200  # another tenant, same address
    assert [client.get("/f/account", {"account": "a1"}).status_code for _ in range(3)] == [200, 200, 429]
    assert client.get("/f/account", {"account": "a2"}).status_code == 200
    unlimited = client.get("/f/account")  # the key function returned None: not limited
    assert unlimited.status_code == 200
    assert "RateLimit" not in unlimited


def test_method_limits_only_those_methods():
    client = Client(REMOTE_ADDR="198.51.100.43")
    assert [client.get("/f/posts").status_code for _ in range(3)] == [200, 200, 200]
    assert [client.post("/f/posts").status_code for _ in range(2)] == [200, 429]


def test_block_false_runs_the_view_and_says_whether_it_was_limited():
    client = Client(REMOTE_ADDR="198.51.100.44")
    first, second = client.get("/f/marks"), client.get("/f/marks")
    assert (first.status_code, first.json()) == (200, {"limited": False})
    assert (second.status_code, second.json()) == (200, {"limited": True})
    assert ";r=0;" in second["RateLimit"]


def test_each_decorated_view_counts_on_its_own():
    client = Client(REMOTE_ADDR="198.51.100.45")
    assert client.get("/f/first").status_code == 200
    assert client.get("/f/second").status_code == 200
    assert client.get("/f/first").status_code == 429


def test_decorator_arguments_are_checked_when_decorating():
    with pytest.raises(ValueError, match="key="):
        quota_limited(rate="1/min", key="cookie")
    with pytest.raises(ValueError, match="method="):
        quota_limited(rate="1/min", method=["GET", "NOT A METHOD"])


def test_enabled_false_turns_every_limit_off(settings, same_rates):
    """Every quota is off; guessing keys is still refused past the address's 30 failures (FAILED_AUTH_LIMITS)."""
    settings.QUOTAS = {**settings.QUOTAS, "ENABLED": False}
    client = Client(REMOTE_ADDR="198.51.100.46")
    for url in ("/f/drf-same", "/f/same", "/prefixed/same"):
        responses = [client.get(url) for _ in range(5)]
        assert [r.status_code for r in responses] == [200] * 5
        assert "RateLimit" not in responses[-1]
    codes = [client.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_{n}").status_code for n in range(40)]
    assert codes == [401] * 30 + [429] * 10


def test_reset_clears_counters_and_every_remembered_refusal(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="2/min", algorithm="fixed_window")
    key = issue_key(plan=plan)
    client = Client()
    assert [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(3)] == [200, 200, 429]
    assert reset(confirm=True) > 0
    # Refused from this process's memory before; now counted afresh in Redis.
    assert [client.get("/api/demo/ping", HTTP_X_API_KEY=key).status_code for _ in range(3)] == [200, 200, 429]


def test_reset_refuses_unless_the_caller_means_it(db, redis_client):
    """It acts on whatever Redis QUOTAS names: without confirm=True nothing is deleted."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="2/min", algorithm="fixed_window")
    Client().get("/api/demo/ping", HTTP_X_API_KEY=issue_key(plan=plan))
    keys = set(redis_client.scan_iter())
    with pytest.raises(ResetNotConfirmed, match="confirm=True"):
        reset()
    assert set(redis_client.scan_iter()) == keys


def test_reset_keeps_unflushed_usage_unless_asked(db, redis_client):
    """Usage counted but not yet flushed is billing data: reset(confirm=True) keeps it; delete_usage=True
    deletes it too."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="5/min", algorithm="fixed_window")
    Client().get("/api/demo/ping", HTTP_X_API_KEY=issue_key(plan=plan))
    prefix = default_engine.runtime().prefix
    usage = {k for k in redis_client.scan_iter() if is_usage_key(prefix, k)}
    assert usage
    assert reset(confirm=True) > 0
    assert {k for k in redis_client.scan_iter() if is_usage_key(prefix, k)} == usage
    version = (
        default_engine.runtime().rules.version_counter.key.encode()
    )  # bumped by the reset, so other processes forget
    assert set(redis_client.scan_iter()) - usage == {version}
    reset(confirm=True, delete_usage=True)
    assert set(redis_client.scan_iter()) == {version}


def test_the_quota_reset_fixture_starts_from_fresh_counters(quota_reset, db):
    """The fixture projects get from ``pytest_plugins = ["quotas.testing"]`` (this suite loads it too)."""
    assert [Client().get("/f/first").status_code for _ in range(2)] == [200, 429]


def test_quota_headers_middleware_runs_async_under_asgi(db):
    """Under ASGI the middleware is async: a request without a decision to settle goes through no thread."""
    from quotas.http.middleware import QuotaHeadersMiddleware

    assert QuotaHeadersMiddleware.async_capable

    async def scenario():
        client = AsyncClient()
        response = await client.get("/f/async")
        await default_engine.runtime().store.transport.aclose()
        return response

    response = async_to_sync(scenario)()
    assert response.status_code == 200
    assert response.content == b"async plain"
