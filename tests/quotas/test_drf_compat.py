"""QuotaThrottle configured the DRF way behaves like DRF's throttles.

Modelled on what DRF's own tests/test_throttling.py checks: per user,
scoped, X-Forwarded-For with NUM_PROXIES, Retry-After values and overridden
hooks; each over HTTP (what a client sees) and at the throttle or engine
level (with an explicit clock where time matters).
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.checks import run_checks
from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from quotas.checks.front_doors import check_throttle_has_rates
from quotas.drf.throttling import QuotaThrottle
from quotas.identity import addresses
from quotas.identity.addresses import client_ip
from quotas.rules.limits import code_rate_algorithm
from tests.factories import EndpointLimitFactory, PlanFactory, UserFactory, issue_key
from tests.script_calls import script_calls

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


# Views and throttles as a project migrating from DRF writes them.


class TenantThrottle(QuotaThrottle):
    """Counts per tenant, the documented DRF way: the cache key names the tenant."""

    def get_cache_key(self, request, view):
        tenant = request.headers.get("X-Tenant")
        if tenant == "internal":
            return None  # not throttled
        return f"tenant:{tenant}" if tenant else super().get_cache_key(request, view)


class ClientIdThrottle(QuotaThrottle):
    """Names anonymous clients by a header rather than their address."""

    def get_ident(self, request):
        return request.headers.get("X-Client-Id", "nobody")


class Ok(APIView):
    def get(self, request):
        return Response({"ok": True})


class ScopedOk(Ok):
    throttle_scope = "uploads"


class TenantOk(Ok):
    throttle_classes = [TenantThrottle]


class ClientIdOk(Ok):
    throttle_classes = [ClientIdThrottle]


urlpatterns = [
    path("ok", Ok.as_view()),
    path("scoped", ScopedOk.as_view()),
    path("tenant", TenantOk.as_view()),
    path("client-id", ClientIdOk.as_view()),
]


@pytest.fixture
def client():
    return APIClient(raise_request_exception=False)


@pytest.fixture
def rates(settings):
    """Sets REST_FRAMEWORK['DEFAULT_THROTTLE_RATES'] (and any other REST_FRAMEWORK key) for one test."""

    def set_rates(rates: dict, **drf: object) -> None:
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates, **drf}

    return set_rates


def statuses(client, path, n, **extra):
    return [client.get(path, **extra).status_code for _ in range(n)]


def drf_request(user=None) -> Request:
    request = Request(APIRequestFactory().get("/ok"))
    request.user = user or AnonymousUser()
    return request


# 1. "N/period" means at most N in any rolling period.


def test_a_drf_rate_admits_at_most_n_in_any_rolling_period(rates, runtime):
    """Like SimpleRateThrottle: after 3 of "3/min", nothing until the oldest is 60 s old; Retry-After says when."""
    rates({"anon": "3/min"})
    windows = [w for rule in QuotaThrottle().get_drf_limits(drf_request(), Ok()) for w in rule.windows]
    assert [(w.algorithm, w.quota, w.window) for w in windows] == [("sliding_window_log", 3, 60)]
    t0 = 1_800_000_000.0
    for t in (t0, t0 + 10, t0 + 15):
        assert runtime.guard.decide("{ip.x}", windows, now=t).allowed
    refused = runtime.guard.decide("{ip.x}", windows, now=t0 + 20)  # a token bucket would admit this one
    assert not refused.allowed
    assert refused.retry_after == 40  # until the request of t0 leaves the window
    assert runtime.guard.decide("{ip.x}", windows, now=t0 + 59.5).retry_after == 1
    assert runtime.guard.decide("{ip.x}", windows, now=t0 + 60).allowed
    assert not runtime.guard.decide("{ip.x}", windows, now=t0 + 61).allowed  # t0+10 and t0+15 still count
    assert runtime.guard.decide("{ip.x}", windows, now=t0 + 70).allowed


def test_over_http_the_fourth_request_waits_for_the_oldest(client, rates):
    """The refusal's Retry-After (and wait()) is the whole period when the first request was just made, as in DRF."""
    rates({"anon": "3/min"})
    assert statuses(client, "/ok", 3) == [200, 200, 200]
    refused = client.get("/ok")
    assert refused.status_code == 429
    assert refused["Retry-After"] == "60"
    assert refused["RateLimit-Policy"] == '"anon";q=3;w=60'
    body = json.loads(refused.content)
    assert body["limit"]["algorithm"] == "sliding_window_log"
    assert body["retry_after"] == 60


def test_another_algorithm_can_be_chosen(rates, runtime, settings):
    """QUOTAS['DRF_ALGORITHM'] picks the algorithm; a token bucket refills 1 request every 20 s of "3/min"."""
    rates({"anon": "3/min"})
    settings.QUOTAS = {**settings.QUOTAS, "DRF_ALGORITHM": "token_bucket"}
    windows = [w for rule in QuotaThrottle().get_drf_limits(drf_request(), Ok()) for w in rule.windows]
    assert windows[0].algorithm == "token_bucket"
    t0 = 1_800_000_000.0
    assert all(runtime.guard.decide("{ip.y}", windows, now=t0).allowed for _ in range(3))
    assert runtime.guard.decide("{ip.y}", windows, now=t0 + 20).allowed


def test_rates_given_in_code_use_drf_algorithm(settings):
    """Every rate string given in code or in DRF's settings is counted with QUOTAS['DRF_ALGORITHM']."""
    assert code_rate_algorithm() == "sliding_window_log"
    settings.QUOTAS = {**settings.QUOTAS, "DRF_ALGORITHM": "leaky_bucket"}
    assert code_rate_algorithm() == "leaky_bucket"


def test_plans_keep_their_own_algorithms(client, rates):
    """The DRF algorithm is for DRF's rates only: a plan's limit counts as its algorithm says."""
    rates({"anon": "100/min"})
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="2/min", algorithm="token_bucket")
    refused = [client.get("/ok") for _ in range(3)][-1]
    assert refused.status_code == 429
    assert json.loads(refused.content)["limit"]["algorithm"] == "token_bucket"


# 2. NUM_PROXIES, as DRF's XffTests.


@pytest.mark.parametrize(
    ("num_proxies", "first", "spoofed", "other"),
    [
        (1, "0.0.0.0, 1.1.1.1, 2.2.2.2", "4.4.4.4, 5.5.5.5, 2.2.2.2", "0.0.0.0, 1.1.1.1, 7.7.7.7"),
        (2, "0.0.0.0, 1.1.1.1, 2.2.2.2", "4.4.4.4, 1.1.1.1, 2.2.2.2", "0.0.0.0, 7.7.7.7, 2.2.2.2"),
    ],
)
def test_num_proxies_picks_the_client_from_x_forwarded_for(client, rates, num_proxies, first, spoofed, other):
    """Spoofing addresses left of the proxies does not make a new client; a different client is counted apart."""
    rates({"anon": "1/min"}, NUM_PROXIES=num_proxies)
    peer = {"REMOTE_ADDR": "10.0.0.1"}
    assert client.get("/ok", HTTP_X_FORWARDED_FOR=first, **peer).status_code == 200
    assert client.get("/ok", HTTP_X_FORWARDED_FOR=spoofed, **peer).status_code == 429
    assert client.get("/ok", HTTP_X_FORWARDED_FOR=other, **peer).status_code == 200


@pytest.mark.parametrize(
    ("num_proxies", "forwarded", "expected"),
    [
        (None, "1.1.1.1", "10.0.0.1"),  # unset: X-Forwarded-For is not believed (no trusted proxy)
        (0, "1.1.1.1, 2.2.2.2", "10.0.0.1"),  # DRF: 0 means REMOTE_ADDR
        (1, "", "10.0.0.1"),  # no header: REMOTE_ADDR
        (1, "1.1.1.1, 2.2.2.2", "2.2.2.2"),
        (3, "1.1.1.1, 2.2.2.2", "1.1.1.1"),  # fewer hops than proxies: the left-most, as DRF
        (1, "1.1.1.1, 2.2.2.2:8080", "2.2.2.2"),  # a port some proxies append
        (1, "1.1.1.1, not-an-address", "10.0.0.1"),  # garbage: the proxy's own address
    ],
)
def test_client_ip_honours_num_proxies(settings, num_proxies, forwarded, expected):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": num_proxies}
    request = APIRequestFactory().get("/ok", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert str(client_ip(request)) == expected
    assert QuotaThrottle().get_ident(Request(request)) == expected


def test_trusted_proxies_win_over_num_proxies(settings, caplog, monkeypatch):
    """With both set, TRUSTED_PROXIES decides; the first request on which they disagree is logged once."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 2}
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXIES": ["10.0.0.0/8"]}
    monkeypatch.setattr(addresses, "_warned_disagreement", False)  # the once-per-process warning, not yet given
    agreeing = APIRequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="1.1.1.1, 10.0.0.2")
    assert str(client_ip(agreeing)) == "1.1.1.1"
    assert "disagree" not in caplog.text
    disagreeing = APIRequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="1.1.1.1, 2.2.2.2")
    assert str(client_ip(disagreeing)) == "2.2.2.2"
    assert "DRF's get_ident() would give 1.1.1.1" in caplog.text


# 3. Overridden hooks.


def test_get_cache_key_counts_per_tenant(client, rates):
    """Users of one tenant share one count, whoever they are; another tenant has its own."""
    rates({"anon": "2/min", "user": "2/min"})
    client.force_authenticate(UserFactory())
    assert statuses(client, "/tenant", 1, HTTP_X_TENANT="acme") == [200]
    client.force_authenticate(UserFactory())
    refused = statuses(client, "/tenant", 2, HTTP_X_TENANT="acme")
    assert refused == [200, 429]
    assert statuses(client, "/tenant", 2, HTTP_X_TENANT="globex") == [200, 200]
    assert statuses(client, "/tenant", 2) == [200, 200]  # no tenant: the default key, this user's own


@pytest.mark.redis
def test_get_cache_key_returning_none_is_not_throttled(client, rates, redis_client):
    """None: admitted, nothing spent, no rate-limit headers, Redis not asked (DRF's contract)."""
    rates({"anon": "1/min"})
    before = script_calls(redis_client)
    responses = [client.get("/tenant", HTTP_X_TENANT="internal") for _ in range(5)]
    assert {r.status_code for r in responses} == {200}
    assert not any(r.has_header("RateLimit") or r.has_header("X-RateLimit-Limit") for r in responses)
    assert script_calls(redis_client) == before
    assert statuses(client, "/tenant", 2) == [200, 429]  # the same client, through the default key


def test_get_cache_key_in_plan_mode(client, redis_client):
    """With plans, the plan still follows the client; the key decides whose counters are spent."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="2/min", algorithm="fixed_window")
    assert statuses(client, "/tenant", 2, HTTP_X_TENANT="acme", REMOTE_ADDR="1.1.1.1") == [200, 200]
    refused = client.get("/tenant", HTTP_X_TENANT="acme", REMOTE_ADDR="2.2.2.2")
    assert refused.status_code == 429
    assert refused["RateLimit-Policy"] == '"global";q=2;w=60'
    assert client.get("/tenant", HTTP_X_TENANT="internal").status_code == 200


def test_get_ident_names_anonymous_clients(client, rates):
    """An overridden get_ident replaces the address; authenticated users are still counted as themselves."""
    rates({"anon": "1/min", "user": "5/min"})
    same_address = {"REMOTE_ADDR": "203.0.113.5"}
    assert client.get("/client-id", HTTP_X_CLIENT_ID="a", **same_address).status_code == 200
    assert client.get("/client-id", HTTP_X_CLIENT_ID="b", **same_address).status_code == 200
    assert client.get("/client-id", HTTP_X_CLIENT_ID="a", **same_address).status_code == 429
    client.force_authenticate(UserFactory())
    assert statuses(client, "/client-id", 2, HTTP_X_CLIENT_ID="a") == [200, 200]


def test_default_hooks_name_the_client(rates):
    """get_ident is the address as counted; get_cache_key names the client by kind."""
    user = UserFactory()
    request = Request(APIRequestFactory().get("/ok", REMOTE_ADDR="2001:db8::1"))
    request.user = user
    throttle = QuotaThrottle()
    assert throttle.get_ident(request) == "2001:db8::/64"
    assert throttle.get_cache_key(request, Ok()) == f"user:{user.pk}"


# 4. anon, user and scope together, as AnonRateThrottle + UserRateThrottle + ScopedRateThrottle.


@pytest.mark.redis
def test_a_scoped_view_also_gets_the_anon_and_user_rates(client, rates, redis_client):
    """An anonymous client of a scoped view is held to the scope's, the anon and the user rate: one decision."""
    rates({"anon": "2/min", "user": "5/min", "uploads": "3/min"})
    before = script_calls(redis_client)
    first = client.get("/scoped")
    assert script_calls(redis_client) == before + 1
    assert first["RateLimit-Policy"] == '"uploads";q=3;w=60, "anon";q=2;w=60, "user";q=5;w=60'
    refused = [first, client.get("/scoped"), client.get("/scoped")][-1]
    assert refused.status_code == 429
    assert json.loads(refused.content)["violated_policies"] == ["anon"]


def test_a_user_is_held_to_the_scope_and_to_the_user_rate(client, rates):
    """The user rate counts every request of the user, scoped or not, as UserRateThrottle does."""
    rates({"anon": "2/min", "user": "5/min", "uploads": "3/min"})
    client.force_authenticate(UserFactory())
    assert statuses(client, "/scoped", 4) == [200, 200, 200, 429]  # the scope: 3
    assert statuses(client, "/ok", 3) == [200, 200, 429]  # the user rate: 3 scoped + 2 here
    assert client.get("/ok")["RateLimit-Policy"] == '"user";q=5;w=60'


def test_only_a_user_rate_also_holds_anonymous_clients(client, rates):
    """DRF's UserRateThrottle counts anonymous clients by address: with no anon rate, they get the user rate."""
    rates({"user": "2/min"})
    assert statuses(client, "/ok", 3) == [200, 200, 429]


def test_a_scope_without_a_rate_leaves_the_anon_and_user_rates(client, rates):
    rates({"anon": "1/min"})
    response = client.get("/scoped")
    assert response["RateLimit-Policy"] == '"anon";q=1;w=60'


# 6. DRF's rates for clients no plan covers.


def test_drf_rates_keep_applying_to_clients_no_plan_covers(client, rates):
    """A first plan that is not the default does not switch DRF's rates off for anonymous clients."""
    rates({"anon": "2/min"})
    pro = PlanFactory(slug="pro", monthly_price=Decimal("49"))
    EndpointLimitFactory(plan=pro, name="global", rates="5/min", algorithm="fixed_window")
    key = issue_key(plan=pro)
    assert statuses(client, "/ok", 3) == [200, 200, 429]
    subscribed = [client.get("/ok", HTTP_X_API_KEY=key) for _ in range(3)]
    assert {r.status_code for r in subscribed} == {200}
    assert subscribed[0]["RateLimit-Policy"] == '"global";q=5;w=60'


def test_a_default_plan_replaces_drf_rates(client, rates):
    """The opt-out: a default plan covers every client, so DRF's rates no longer apply to anyone."""
    rates({"anon": "1/min"})
    free = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=free, name="global", rates="3/min", algorithm="fixed_window")
    assert statuses(client, "/ok", 4) == [200, 200, 200, 429]


# System checks: what a project migrating from DRF's throttles is told at start-up.


def check_ids(**options) -> list[str]:
    """The quotas ids `manage.py check` reports (system checks as a project runs them)."""
    return sorted(m.id for m in run_checks(**options) if m.id and m.id.startswith("quotas."))


@pytest.fixture
def drf_only(settings):
    """Getting started's DRF-only setup: QuotaThrottle, no rules backend."""
    settings.QUOTAS = {**settings.QUOTAS, "RULES_BACKEND": None}
    return settings


@pytest.mark.parametrize(
    ("throttle_rates", "warned_about"),
    [
        ({}, "anonymous or authenticated requests"),
        ({"anon": "10/min"}, "authenticated requests"),
        ({"user": "10/min"}, None),  # anonymous clients get the user rate, as with DRF's UserRateThrottle
        ({"anon": "10/min", "user": "20/min"}, None),
    ],
)
def test_w031_no_rate_for_some_kind_of_request(drf_only, rates, throttle_rates, warned_about):
    """DRF's throttles raise ImproperlyConfigured without a rate; QuotaThrottle would admit silently: W031 says so."""
    rates(throttle_rates)
    messages = check_throttle_has_rates()
    if warned_about is None:
        assert messages == []
    else:
        assert [m.id for m in messages] == ["quotas.W031"]
        assert f"no rate applies to {warned_about}" in messages[0].msg
        assert "DEFAULT_THROTTLE_RATES" in messages[0].hint
        assert "quotas.W031" in check_ids()


def test_w031_is_quiet_without_quota_throttle(drf_only, rates):
    rates({}, DEFAULT_THROTTLE_CLASSES=["rest_framework.throttling.AnonRateThrottle"])
    assert check_throttle_has_rates() == []


def test_w032_no_default_plan_and_no_rates_is_a_database_check(rates):
    """With a rules backend the database knows: W032 runs with --database (and in migrate), not at every start."""
    rates({})
    assert "quotas.W032" not in check_ids()
    assert "quotas.W032" in check_ids(databases=["default"])
    PlanFactory(slug="pro")  # a plan, but not the default: anonymous clients are still unlimited
    assert "quotas.W032" in check_ids(databases=["default"])
    rates({"user": "10/min"})
    assert "quotas.W032" not in check_ids(databases=["default"])
    rates({})
    PlanFactory(slug="free", is_default=True)
    assert "quotas.W032" not in check_ids(databases=["default"])


@pytest.mark.parametrize(
    ("num_proxies", "trusted", "warned"),
    [(0, ["10.0.0.0/8"], True), (1, ["10.0.0.0/8"], False), (0, [], False), (None, ["10.0.0.0/8"], False)],
)
def test_w030_num_proxies_zero_beside_trusted_proxies(settings, num_proxies, trusted, warned):
    """NUM_PROXIES = 0 says no X-Forwarded-For is believed; trusted proxies say the opposite."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": num_proxies}
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXIES": trusted}
    assert ("quotas.W030" in check_ids()) is warned


def test_e030_drf_algorithm_must_be_an_algorithm(settings):
    settings.QUOTAS = {**settings.QUOTAS, "DRF_ALGORITHM": "magic"}
    assert "quotas.E030" in check_ids()
    settings.QUOTAS = {**settings.QUOTAS, "DRF_ALGORITHM": "fixed_window"}
    assert "quotas.E030" not in check_ids()
