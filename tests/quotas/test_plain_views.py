"""Plain Django views (outside DRF): quota_limited and PathQuotaMiddleware, over HTTP and ASGI."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.core.checks import run_checks
from django.test import AsyncClient, Client

from quotas.checks import check_settings
from quotas.contract.library import function_name, library_name
from quotas.django.decorators import quota_limited
from quotas.django.respond import rate_rule
from quotas.engine import default_engine
from quotas.exceptions import InvalidRate
from quotas.store.decision import DecideCall
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.quotas.plain_urls")]

PROBLEM = "application/problem+json"


@pytest.fixture
def client():
    return Client(raise_request_exception=False)


@pytest.fixture
def hooks(settings):
    """PathQuotaMiddleware on /hooks/ (3 a minute) and /ahooks/ (1 a minute), after authentication."""
    settings.QUOTAS = {
        **settings.QUOTAS,
        "PATH_LIMITS": [
            {"prefix": "/hooks/", "scope": "webhook", "rate": "3/min"},
            {"prefix": "/ahooks/", "scope": "awebhook", "rate": "1/min"},
        ],
    }
    middleware = list(settings.MIDDLEWARE)
    after = middleware.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1
    settings.MIDDLEWARE = [*middleware[:after], "quotas.django.middleware.PathQuotaMiddleware", *middleware[after:]]


def assert_refused_like_drf(response, quota: int) -> dict:
    """A 429 problem+json with Retry-After and the draft's RateLimit headers; returns the body."""
    assert response.status_code == 429
    assert response["Content-Type"] == PROBLEM
    assert int(response["Retry-After"]) >= 1
    assert f";q={quota};" in response["RateLimit-Policy"]
    assert ";r=0;" in response["RateLimit"]
    body = json.loads(response.content)
    assert body["status"] == 429
    assert body["reason"] == "rate_limited"
    assert body["retry_after"] == int(response["Retry-After"])
    return body


def test_a_decorated_view_is_limited_at_its_rate(client):
    """@quota_limited(rate="2/min"): two sign-in pages, then 429 problem+json; the view does not run."""
    first = client.get("/login/")
    assert first.status_code == 200
    assert first.content == b"<form>sign in</form>"
    assert first["RateLimit-Policy"] == '"login";q=2;w=60'
    assert first["RateLimit"].startswith('"login";r=1;')
    assert client.post("/login/").status_code == 200
    body = assert_refused_like_drf(client.post("/login/"), 2)
    assert body["limit"]["name"] == "login"


def test_clients_are_counted_apart_by_address(client):
    """The limit is per client: another address has its own two requests."""
    for _ in range(2):
        client.get("/login/")
    assert client.get("/login/").status_code == 429
    assert client.get("/login/", REMOTE_ADDR="10.0.0.9").status_code == 200


def test_views_outside_the_quota_layer_are_untouched(client):
    """A view neither decorated nor under a PATH_LIMITS prefix gets no headers."""
    response = client.get("/open/")
    assert response.status_code == 200
    assert "RateLimit-Policy" not in response


@pytest.fixture
def plan(db):
    plan = PlanFactory(slug="free", monthly_price=Decimal("0"), is_default=True)
    EndpointLimitFactory(plan=plan, name="search", scope="search", rates="2/min", algorithm="sliding_window_log")
    return plan


def test_a_scope_takes_the_plans_limits(client, plan):
    """@quota_limited(scope="search") spends the plan's "search" limit, as a DRF view with quota_scope does."""
    assert client.get("/search/").status_code == 200
    assert client.get("/search/").status_code == 200
    body = assert_refused_like_drf(client.get("/search/"), 2)
    assert body["plan"] == "free"


def test_api_keys_count_against_their_subscription(client, plan):
    """An API key sent to a plain view is its subscription's client; a bad one is a 401 problem."""
    key = issue_key(plan=plan)
    for _ in range(2):
        assert client.get("/search/", HTTP_X_API_KEY=key).status_code == 200
    assert client.get("/search/", HTTP_X_API_KEY=key).status_code == 429
    assert client.get("/search/").status_code == 200  # the address is another client
    bad = client.get("/search/", HTTP_X_API_KEY="not-a-key")
    assert bad.status_code == 401
    assert bad["Content-Type"] == PROBLEM
    assert bad["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'


def test_a_rate_in_code_applies_beside_the_plans(client, plan):
    """With plans in the database, the view's own rate still limits the sign-in form."""
    for _ in range(2):
        assert client.get("/login/").status_code == 200
    assert client.get("/login/").status_code == 429


def test_without_plans_or_rate_drf_rates_apply_to_the_scope(client, settings):
    """No plan and no rate: REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'][scope], like DRF's ScopedRateThrottle."""
    assert "RateLimit" not in client.get("/search/")  # no rate anywhere: admitted, nothing to report
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"search": "1/min"}}
    assert client.get("/search/").status_code == 200
    assert_refused_like_drf(client.get("/search/"), 1)


def test_a_plain_view_and_a_drf_view_of_one_scope_spend_one_window(settings, rf):
    """DRF's rate of a scope is one limit whichever front door applies it: the decorator's fallback and
    QuotaThrottle's (DRF's ScopedRateThrottle) name the same window, so a client cannot spend the rate twice."""
    from rest_framework.request import Request

    from quotas.django.respond import facts_for
    from quotas.drf.throttling import QuotaThrottle

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"search": "1/min"}}
    (plain,) = facts_for(rf.get("/search/"), "search").fallback
    view = type("SearchView", (), {"throttle_scope": "search"})()
    drf = QuotaThrottle().get_drf_limits(Request(rf.get("/api/search/")), view)
    assert [w.state_field for w in plain.windows] == [
        w.state_field for r in drf if r.name == "search" for w in r.windows
    ]


def test_a_server_error_is_settled_by_the_headers_middleware(client, redis_client, settings):
    """After the view, the decision is settled once (QuotaHeadersMiddleware's code) and headers added."""
    assert "quotas.middleware.QuotaHeadersMiddleware" in settings.MIDDLEWARE  # would settle a second time
    response = client.get("/failing/")
    assert response.status_code == 500
    assert response["RateLimit"].startswith('"failing";r=4;')
    assert client.get("/failing/")["RateLimit"].startswith('"failing";r=3;')


def test_an_exception_in_the_view_propagates_after_the_decision_is_settled(client):
    """The view's exception reaches Django's handlers (process_exception hooks, ATOMIC_REQUESTS, a 500);
    the decision was counted once and settled as a failed request's."""
    with pytest.raises(RuntimeError, match="the view failed"):
        Client().get("/raising/")
    again = client.get("/raising/")
    assert again.status_code == 500
    assert Client().get("/login/").status_code == 200  # another view: counters of its own


def test_a_malformed_rate_fails_when_the_view_is_decorated():
    """A typo in the rate is an error at import time, not a 500 on every request."""
    with pytest.raises(InvalidRate):
        quota_limited(scope="x", rate="2/fortnight")
    with pytest.raises(ValueError, match="weight"):
        quota_limited(scope="x", weight=-1)
    with pytest.raises(ValueError, match=r"MAX_REQUEST_WEIGHT'\] \(1000000\)"):
        quota_limited(scope="x", weight=1_000_001)  # every request would be refused: said at import


def test_the_middleware_limits_paths_under_its_prefixes(client, hooks):
    """PathQuotaMiddleware: three webhook deliveries a minute, the fourth a 429 problem; other paths pass."""
    for _ in range(3):
        assert client.post("/hooks/receive").status_code == 200
    body = assert_refused_like_drf(client.post("/hooks/receive"), 3)
    assert body["limit"]["name"] == "webhook"
    assert "RateLimit" not in client.get("/open/")


@pytest.mark.parametrize(
    "limits",
    [
        "/hooks/",
        [{"prefix": "hooks/", "scope": "x"}],
        [{"prefix": "/hooks/", "scope": "x", "rate": "3/fortnight"}],
        [{"prefix": "/hooks/", "scope": 3}],
        [{"prefix": "/hooks/", "scop": "x"}],
    ],
)
def test_bad_path_limits_are_system_check_errors(settings, limits):
    """A malformed QUOTAS['PATH_LIMITS'] is a quotas.E040 at startup, not a 500 per request."""
    settings.QUOTAS = {**settings.QUOTAS, "PATH_LIMITS": limits}
    assert [e.id for e in check_settings()] == ["quotas.E040"]
    assert "quotas.E040" in [e.id for e in run_checks()]


# No async test plugin is installed: each ASGI scenario runs in an event loop of its own (async_to_sync).


def test_an_async_view_is_limited_under_asgi():
    """An async def view under ASGI (AsyncClient): the same limit, the same 429 problem+json."""

    async def scenario():
        client = AsyncClient(raise_request_exception=False)
        first = await client.get("/async-login/")
        assert first.status_code == 200
        assert first.content == b"async sign in"
        assert first["RateLimit"].startswith('"alogin";r=1;')
        assert (await client.get("/async-login/")).status_code == 200
        assert_refused_like_drf(await client.get("/async-login/"), 2)
        await default_engine.runtime().store.transport.aclose()

    async_to_sync(scenario)()


def test_the_middleware_limits_async_views_under_asgi(hooks):
    """PathQuotaMiddleware in an async middleware chain: one delivery a minute, then 429."""

    async def scenario():
        client = AsyncClient(raise_request_exception=False)
        assert (await client.post("/ahooks/receive")).status_code == 200
        assert_refused_like_drf(await client.post("/ahooks/receive"), 1)
        await default_engine.runtime().store.transport.aclose()

    async_to_sync(scenario)()


@pytest.mark.redis
def test_async_and_sync_decisions_share_scripts_and_keys(runtime, redis_client):
    """redis-py's asyncio client calls the same decide function on the same keys: each side sees the other's use."""
    window = rate_rule("shared", "3/min", "sliding_window_log").windows[0]

    async def spend():
        decision = await runtime.guard.adecide(DecideCall("{ip.192.0.2.1}", [window]))
        await default_engine.runtime().store.transport.aclose()
        return decision

    redis_client.function_flush()  # so the library the asyncio client loads is seen to be the engine's
    first = async_to_sync(spend)()
    assert len(redis_client.function_list()) == 1
    assert redis_client.function_list(library=library_name())
    assert runtime.store.transport.script("decide").function == function_name("decide")
    assert first.allowed
    assert first.states[0].remaining == 2
    assert runtime.guard.decide("{ip.192.0.2.1}", [window]).states[0].remaining == 1
    assert async_to_sync(spend)().states[0].remaining == 0
    refused = async_to_sync(spend)()
    assert not refused.allowed
    assert refused.retry_after >= 1


def test_an_async_view_gets_the_failure_mode_when_redis_is_down(redis_server, settings):
    """Redis unreachable from the asyncio client: the closed failure mode's 503 problem, as for DRF views."""
    settings.QUOTAS = {**settings.QUOTAS, "FAILURE_MODE": "closed"}

    async def scenario():
        client = AsyncClient(raise_request_exception=False)
        response = await client.get("/async-login/")
        await default_engine.runtime().store.transport.aclose()
        return response

    redis_server.stop()
    try:
        response = async_to_sync(scenario)()
    finally:
        redis_server.start()
    assert response.status_code == 503
    assert response["Content-Type"] == PROBLEM
    assert json.loads(response.content)["reason"] == "quota_store_unavailable"
