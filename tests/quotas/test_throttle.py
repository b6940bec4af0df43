"""QuotaThrottle as a client sees it: statuses, headers and problem bodies over HTTP."""

from __future__ import annotations

import json
import re
import time
from decimal import Decimal

import pytest
from rest_framework.exceptions import Throttled
from rest_framework.test import APIClient, APIRequestFactory

from plans.models import EndpointLimit, LimitOverride
from quotas.engine import default_engine
from quotas.exceptions import QuotaExceeded
from quotas.http.context import verdict_of
from quotas.throttling import QuotaThrottle
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, UserFactory, issue_key
from tests.script_calls import script_calls
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

SF_ITEM = r'"[^"]+";q=\d+;w=\d+'
SF_STATE = r'"[^"]+";r=\d+;t=\d+'


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", monthly_price=Decimal("0"), is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="3/min", algorithm="fixed_window")
    EndpointLimitFactory(plan=plan, name="search", scope="search", rates="2/min", algorithm="sliding_window_log")
    return plan


@pytest.fixture
def pro(db):
    plan = PlanFactory(slug="pro", monthly_price=Decimal("49"), priority=5)
    EndpointLimitFactory(plan=plan, name="global", rates="100/min", algorithm="fixed_window")
    EndpointLimitFactory(plan=plan, name="search", scope="search", rates="50/min", algorithm="sliding_window_log")
    return plan


@pytest.fixture
def client():
    return APIClient(raise_request_exception=False)


def get(client, path, key=None, **extra):
    if key is not None:
        extra["HTTP_X_API_KEY"] = key
    return client.get(path, **extra)


def test_admitted_response_carries_standard_headers(client, free, quota_clock):
    """Every throttled response says how much is left, in both header styles."""
    response = get(client, "/api/demo/ping", issue_key(plan=free))
    assert response.status_code == 200
    assert response["X-RateLimit-Limit"] == "3"
    assert response["X-RateLimit-Remaining"] == "2"
    assert int(response["X-RateLimit-Reset"]) >= int(time.time())
    assert re.fullmatch(SF_ITEM, response["RateLimit-Policy"])
    assert response["RateLimit-Policy"] == '"global";q=3;w=60'
    assert re.fullmatch(SF_STATE, response["RateLimit"])


def test_every_applicable_policy_is_listed(client, free):
    """A scoped view lists the plan-wide and the scoped policy."""
    response = get(client, "/api/demo/search?q=a", issue_key(plan=free))
    assert response["RateLimit-Policy"] == '"global";q=3;w=60, "search";q=2;w=60'
    assert re.fullmatch(f"{SF_STATE}, {SF_STATE}", response["RateLimit"])


def test_refusal_is_429_problem_json_with_retry_after_and_upgrade(client, free, pro):
    """Past the limit: 429, Retry-After, a problem body naming the limit and a bigger plan."""
    key = issue_key(plan=free)
    for _ in range(2):
        assert get(client, "/api/demo/search?q=a", key).status_code == 200
    response = get(client, "/api/demo/search?q=a", key)
    assert response.status_code == 429
    assert response["Content-Type"] == "application/problem+json"
    retry = int(response["Retry-After"])
    assert 1 <= retry <= 60
    body = json.loads(response.content)
    assert body["status"] == 429
    assert body["type"].endswith("#quota-exceeded")
    assert body["limit"] == {"name": "search", "quota": 2, "window": 60, "algorithm": "sliding_window_log",
                             "remaining": 0}  # fmt: skip
    assert body["retry_after"] == retry
    assert body["upgrade"]["plan"] == "pro"
    assert body["plan"] == "free"
    assert response["X-RateLimit-Remaining"] == "0"


def test_no_upgrade_offered_from_the_top_plan(client, free, pro):
    key = issue_key(plan=pro)
    for _ in range(50):
        get(client, "/api/demo/search?q=a", key)
    body = json.loads(get(client, "/api/demo/search?q=a", key).content)
    assert "upgrade" not in body


def test_wait_returns_the_same_retry_after(free):
    """A refusal is raised as DRF's Throttled carrying the decision's wait; DRF's wait() hook agrees with it."""
    factory = APIRequestFactory()
    from demo.views import SearchView

    view = SearchView()
    throttle = QuotaThrottle()
    key = issue_key(plan=free)
    for _ in range(2):
        request = view.initialize_request(factory.get("/api/demo/search", HTTP_X_API_KEY=key))
        assert throttle.allow_request(request, view) is True
    request = view.initialize_request(factory.get("/api/demo/search", HTTP_X_API_KEY=key))
    with pytest.raises(Throttled) as refused:
        throttle.allow_request(request, view)
    assert isinstance(refused.value.refusal, QuotaExceeded)
    assert refused.value.problem["reason"] == "rate_limited"
    assert throttle.wait() == refused.value.wait == verdict_of(request).decision.retry_after >= 1


@pytest.mark.parametrize(
    ("key", "reason"),
    [("qk_not_a_real_key", "api_key_unknown"), ("x" * 5000, "api_key_malformed"), ("ключ", "api_key_malformed"),
     ("\x00\x01binary", "api_key_malformed"), ("", "api_key_malformed")],
)  # fmt: skip
def test_bad_api_keys_get_401_problem(client, free, key, reason):
    """Unknown, huge, non-ASCII, binary or empty keys: 401 with a clear body, never anonymous, never 500."""
    response = get(client, "/api/demo/ping", key)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["reason"] == reason
    assert response["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'


def test_revoked_key_gets_401(client, free):
    sub = SubscriptionFactory(plan=free)
    from plans.models import APIKey

    key_obj, raw = APIKey.issue(sub)
    assert get(client, "/api/demo/ping", raw).status_code == 200
    key_obj.revoke()
    response = get(client, "/api/demo/ping", raw)
    assert response.status_code == 401
    assert json.loads(response.content)["reason"] == "api_key_revoked"


def test_anonymous_clients_get_the_default_plan_by_ip(client, free):
    """No key, no user: the default plan, counted per IP address."""
    codes = [get(client, "/api/demo/ping", REMOTE_ADDR="203.0.113.7").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    assert get(client, "/api/demo/ping", REMOTE_ADDR="203.0.113.8").status_code == 200


def test_spoofed_forwarded_for_from_untrusted_peer_is_ignored(client, free):
    """X-Forwarded-For is believed only from trusted proxies."""
    codes = [
        get(client, "/api/demo/ping", REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR=f"10.9.9.{i}").status_code
        for i in range(4)
    ]
    assert codes == [200, 200, 200, 429]


def test_forwarded_for_from_trusted_proxy_names_the_client(client, free, settings):
    """Behind a trusted proxy the right-most untrusted address is the client."""
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXIES": ["10.0.0.0/8"]}
    for client_ip in ("198.51.100.1", "198.51.100.2"):
        codes = [
            get(client, "/api/demo/ping", REMOTE_ADDR="10.0.0.5",
                HTTP_X_FORWARDED_FOR=f"1.2.3.4, {client_ip}, 10.0.0.9").status_code
            for _ in range(4)
        ]  # fmt: skip
        assert codes == [200, 200, 200, 429]


@pytest.mark.parametrize(
    ("hop", "same_client"),
    [("198.51.100.7:5678", "198.51.100.7"), ("[2001:db8::1]:443", "2001:db8::1")],
)
def test_forwarded_for_hops_with_a_port_are_parsed(client, free, settings, hop, same_client):
    """A hop with a port names the same client as the bare address, not garbage (nor the proxy)."""
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXIES": ["10.0.0.0/8"]}
    via_proxy = {"REMOTE_ADDR": "10.0.0.5"}
    codes = [get(client, "/api/demo/ping", HTTP_X_FORWARDED_FOR=hop, **via_proxy).status_code for _ in range(2)]
    codes.append(get(client, "/api/demo/ping", HTTP_X_FORWARDED_FOR=same_client, **via_proxy).status_code)
    codes.append(get(client, "/api/demo/ping", HTTP_X_FORWARDED_FOR="198.51.100.99", **via_proxy).status_code)
    assert codes == [200, 200, 200, 200]
    assert get(client, "/api/demo/ping", HTTP_X_FORWARDED_FOR=hop, **via_proxy).status_code == 429


def test_an_unparsable_peer_address_is_warned_about_once(client, free, caplog, monkeypatch):
    """Behind a proxy on a Unix socket every anonymous client would share one bucket: say how to fix it, once."""
    from quotas.identity import addresses as identity

    monkeypatch.setattr(identity, "_warned_peer", False)  # the once-per-process warning, not yet given
    for peer in ("", "unix:/run/gunicorn.sock", "unix:/run/other.sock"):
        get(client, "/api/demo/ping", REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR="198.51.100.1")
    warnings = [r for r in caplog.records if "is not an IP address" in r.getMessage()]
    assert len(warnings) == 1
    assert "add 'unix' to QUOTAS['TRUSTED_PROXIES']" in warnings[0].getMessage()
    # Untrusted, the forwarded address was not believed: the three requests shared one bucket.
    assert get(client, "/api/demo/ping", REMOTE_ADDR="", HTTP_X_FORWARDED_FOR="198.51.100.2").status_code == 429


def test_a_proxy_on_a_unix_socket_is_trusted_with_the_unix_entry(client, free, settings, caplog, monkeypatch):
    """With "unix" in TRUSTED_PROXIES, clients behind a Unix-socket proxy are told apart by X-Forwarded-For."""
    from quotas.identity import addresses as identity

    monkeypatch.setattr(identity, "_warned_peer", False)  # the once-per-process warning, not yet given
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXIES": ["unix", "10.0.0.0/8"]}
    for client_ip in ("198.51.100.1", "198.51.100.2"):
        codes = [
            get(client, "/api/demo/ping", REMOTE_ADDR="", HTTP_X_FORWARDED_FOR=f"1.2.3.4, {client_ip}:5678, 10.0.0.9")
            .status_code for _ in range(4)
        ]  # fmt: skip
        assert codes == [200, 200, 200, 429]
    assert not [r for r in caplog.records if "is not an IP address" in r.getMessage()]
    # A client on TCP is not a Unix-socket proxy: its X-Forwarded-For is still not believed.
    codes = [
        get(client, "/api/demo/ping", REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR=f"198.51.100.{10 + i}")
        .status_code for i in range(4)
    ]  # fmt: skip
    assert codes == [200, 200, 200, 429]


def test_a_unix_socket_proxy_that_forwards_nothing_is_warned_about(client, free, settings, caplog, monkeypatch):
    """Trusted, but no X-Forwarded-For: still one bucket for everyone, and the warning says what the proxy lacks."""
    from quotas.identity import addresses as identity

    monkeypatch.setattr(identity, "_warned_peer", False)  # the once-per-process warning, not yet given
    settings.QUOTAS = {**settings.QUOTAS, "TRUSTED_PROXIES": ["unix"]}
    assert get(client, "/api/demo/ping", REMOTE_ADDR="").status_code == 200
    (warning,) = [r.getMessage() for r in caplog.records if "is not an IP address" in r.getMessage()]
    assert "proxy_set_header X-Forwarded-For" in warning


def test_without_a_client_address_failed_keys_do_not_lock_everyone_out(client, free, settings):
    """Clients without an address share it: guesses there are not counted per address (one guesser
    would otherwise block every client's API key)."""
    settings.QUOTAS = {**settings.QUOTAS, "FAILED_AUTH_LIMITS": {"address": "3/10min", "username": "2/10min"}}
    key = issue_key(plan=free)
    for i in range(6):
        assert get(client, "/api/demo/ping", f"qk_guess_{i}", REMOTE_ADDR="").status_code == 401
    assert get(client, "/api/demo/ping", key, REMOTE_ADDR="").status_code == 200


def test_ipv6_clients_are_grouped_by_prefix(client, free):
    """Rotating addresses inside one /64 does not escape the limit."""
    codes = [get(client, "/api/demo/ping", REMOTE_ADDR=f"2001:db8::{i}").status_code for i in range(1, 5)]
    assert codes == [200, 200, 200, 429]


def test_authenticated_user_with_subscription_uses_its_plan(client, free, pro):
    user = UserFactory()
    SubscriptionFactory(plan=pro, user=user)
    client.force_authenticate(user)
    codes = {get(client, "/api/demo/ping").status_code for _ in range(10)}
    assert codes == {200}


def test_a_users_new_subscription_applies_on_the_next_request(client, free, pro):
    """A signed-in user's client is kept between requests only until the rules change: a subscription taken out
    counts the user on its plan from the next request."""
    user = UserFactory()
    client.force_authenticate(user)
    assert [get(client, "/api/demo/ping").status_code for _ in range(4)][-1] == 429  # the default plan's 3
    SubscriptionFactory(plan=pro, user=user)
    response = get(client, "/api/demo/ping")
    assert response.status_code == 200
    assert response["X-RateLimit-Limit"] == "100"


def test_keys_of_one_subscription_share_its_limits(client, free):
    """Rotating keys does not reset a customer's quota."""
    sub = SubscriptionFactory(plan=free)
    keys = [issue_key(sub) for _ in range(4)]
    assert [get(client, "/api/demo/ping", k).status_code for k in keys] == [200, 200, 200, 429]


def test_subscription_override_replaces_the_plan_limit(client, free):
    sub = SubscriptionFactory(plan=free)
    LimitOverride.objects.create(subscription=sub, limit=free.limits.get(name="global"), rates="5/min")
    key = issue_key(sub)
    assert [get(client, "/api/demo/ping", key).status_code for _ in range(6)] == [200] * 5 + [429]


def test_subscription_override_can_lift_a_limit(client, free):
    sub = SubscriptionFactory(plan=free)
    LimitOverride.objects.create(subscription=sub, limit=free.limits.get(name="global"), unlimited=True)
    key = issue_key(sub)
    responses = [get(client, "/api/demo/ping", key) for _ in range(10)]
    assert {r.status_code for r in responses} == {200}
    assert "RateLimit-Policy" not in responses[0]


def test_plan_change_applies_on_next_request(client, free, pro):
    sub = SubscriptionFactory(plan=free)
    key = issue_key(sub)
    assert [get(client, "/api/demo/ping", key).status_code for _ in range(4)][-1] == 429
    sub.plan = pro
    sub.save()
    response = get(client, "/api/demo/ping", key)
    assert response.status_code == 200
    assert response["X-RateLimit-Limit"] == "100"


def test_raised_limit_applies_at_once_to_a_remembered_client(client, free):
    """A client remembered as over-limit is forgotten when the rules change."""
    key = issue_key(plan=free)
    assert [get(client, "/api/demo/ping", key).status_code for _ in range(4)][-1] == 429
    limit = free.limits.get(name="global")
    limit.rates = "10/min"
    limit.save()
    assert get(client, "/api/demo/ping", key).status_code == 200


@pytest.mark.slow
def test_change_made_elsewhere_reaches_this_process_within_two_seconds(client, free, redis_client):
    """Another process's change (a bumped version in Redis) is picked up without restart."""
    key = issue_key(plan=free)
    assert get(client, "/api/demo/ping", key)["X-RateLimit-Limit"] == "3"
    # As another process would: change the row without signals, then bump the version.
    EndpointLimit.objects.filter(plan=free, name="global").update(rates="7/min")
    redis_client.incr("quota:v1:rules-version")
    assert wait_until(lambda: get(client, "/api/demo/ping", key)["X-RateLimit-Limit"] == "7", 2.0, every=0.1)


def test_view_weight_spends_several_units(client, free):
    EndpointLimit.objects.filter(plan=free, name="global").update(rates="100/min")
    EndpointLimitFactory(plan=free, name="weighted", scope="weighted", rates="10/min", algorithm="fixed_window")
    key = issue_key(plan=free)
    assert get(client, "/t/weighted?w=6", key).status_code == 200
    response = get(client, "/t/weighted?w=6", key)
    assert response.status_code == 429
    assert json.loads(response.content)["limit"]["name"] == "weighted"


def test_refund_on_server_error(client, free):
    """With refund_on_error, a request that ends in a 5xx does not count."""
    EndpointLimitFactory(plan=free, name="failing", scope="failing", rates="1/min", refund_on_error=True)
    key = issue_key(plan=free)
    assert get(client, "/t/failing", key).status_code == 500
    assert get(client, "/t/failing", key).status_code == 500  # not 429: the first was refunded


def test_no_refund_by_default(client, free):
    EndpointLimitFactory(plan=free, name="failing", scope="failing", rates="1/min")
    key = issue_key(plan=free)
    assert get(client, "/t/failing", key).status_code == 500
    assert get(client, "/t/failing", key).status_code == 429


def test_shadow_limit_never_blocks(client, free):
    EndpointLimit.objects.filter(plan=free, name="global").update(shadow=True)
    key = issue_key(plan=free)
    assert {get(client, "/api/demo/ping", key).status_code for _ in range(6)} == {200}


def test_mixed_with_drf_throttles(client, free, settings):
    """A view listing DRF's own throttle beside QuotaThrottle keeps working."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": "100/min"}}
    assert [get(client, "/t/mixed").status_code for _ in range(4)] == [200, 200, 200, 429]


class TestDRFCompatibility:
    """With no plan in the database, QuotaThrottle reads DRF's own rate settings."""

    def test_anon_and_user_rates(self, client, settings):
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {"anon": "2/min", "user": "3/min"},
        }
        assert [get(client, "/api/demo/ping").status_code for _ in range(3)] == [200, 200, 429]
        client.force_authenticate(UserFactory())
        assert [get(client, "/api/demo/ping").status_code for _ in range(4)] == [200, 200, 200, 429]

    def test_throttle_scope_on_the_view(self, client, settings):
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"scoped": "1/min"}}
        first, second = get(client, "/t/scoped"), get(client, "/t/scoped")
        assert (first.status_code, second.status_code) == (200, 429)
        assert first["RateLimit-Policy"] == '"scoped";q=1;w=60'
        assert second["Content-Type"] == "application/problem+json"

    def test_rate_attribute_on_a_subclass(self, client):
        assert [get(client, "/t/rate-attr").status_code for _ in range(3)] == [200, 200, 429]

    def test_no_rates_means_no_throttling(self, client):
        assert {get(client, "/api/demo/ping").status_code for _ in range(20)} == {200}


def test_redis_down_fails_open_when_configured(client, free, redis_server, settings):
    settings.QUOTAS = {**settings.QUOTAS, "FAILURE_MODE": "open"}
    get(client, "/api/demo/ping", REMOTE_ADDR="203.0.113.9")  # load rules while Redis is up
    redis_server.stop()
    try:
        assert {get(client, "/api/demo/ping", REMOTE_ADDR="203.0.113.9").status_code for _ in range(10)} == {200}
    finally:
        redis_server.start()


def test_redis_down_fails_closed_when_configured(client, free, redis_server, settings):
    settings.QUOTAS = {**settings.QUOTAS, "FAILURE_MODE": "closed"}
    get(client, "/api/demo/ping", REMOTE_ADDR="203.0.113.9")  # load rules while Redis is up
    redis_server.stop()
    try:
        response = get(client, "/api/demo/ping", REMOTE_ADDR="203.0.113.9")
        assert response.status_code == 503
        assert response["Content-Type"] == "application/problem+json"
    finally:
        redis_server.start()


@pytest.mark.redis
@pytest.mark.parametrize("w", [str(10**12), "1000001", "-5"])
def test_a_weight_out_of_bounds_is_a_400_problem_and_redis_is_never_asked(client, free, redis_client, w):
    """An enormous weight would make the script's HINCRBY fail and open the breaker for every tenant."""
    EndpointLimitFactory(plan=free, name="weighted", scope="weighted", rates="10/min", algorithm="fixed_window")
    key = issue_key(plan=free)
    get(client, "/api/demo/ping", key)  # rules and key cached
    calls = script_calls(redis_client)
    response = get(client, f"/t/weighted?w={w}", key)
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    body = json.loads(response.content)
    assert body["reason"] == "quota_weight_out_of_bounds"
    assert "1000000" in body["detail"]
    assert script_calls(redis_client) == calls
    runtime = default_engine.runtime()
    assert not runtime.guard.breaker.is_open
    after = get(client, "/t/weighted?w=1", key)  # the next request is decided by Redis, as before
    assert after.status_code == 200
    assert after["X-RateLimit-Remaining"] == "1"  # global 3/min: the ping and this one spent


def test_a_cost_estimate_out_of_bounds_is_a_400_problem(client, free, settings):
    settings.QUOTAS = {**settings.QUOTAS, "MAX_REQUEST_COST": 100}
    key = issue_key(plan=free)
    for estimate in ("100.01", "-0.01"):  # a negative one would credit the budget
        response = get(client, f"/t/priced?est={estimate}", key)
        assert response.status_code == 400
        assert json.loads(response.content)["reason"] == "quota_cost_out_of_bounds"
    assert get(client, "/t/priced?est=100", key).status_code == 200
    assert not default_engine.runtime().guard.breaker.is_open


def test_the_largest_weight_and_cost_the_checks_allow_are_decided_by_redis(client, free, settings):
    """At the caps checks E016/E017 accept, Redis decides the request (no script error, no fallback)."""
    settings.QUOTAS = {**settings.QUOTAS, "MAX_REQUEST_WEIGHT": 10**12, "MAX_REQUEST_COST": 10**9}
    EndpointLimitFactory(plan=free, name="weighted", scope="weighted", rates="10/min", algorithm="fixed_window")
    key = issue_key(plan=free)
    for path in (f"/t/weighted?w={10**12}", f"/t/priced?est={10**9}", f"/t/priced?est=1&actual={10**9}"):
        response = get(client, path, key)
        assert response.status_code in (200, 429), path  # a refusal by the limit, or admitted
        assert verdict_of(response.wsgi_request) is not None
        assert not verdict_of(response.wsgi_request).decision.fallback, path
    assert not default_engine.runtime().guard.breaker.is_open


def test_a_view_giving_a_weight_of_the_wrong_type_is_named_in_the_error(free):
    """A programming mistake is the view's: the error names it (and Redis is not involved)."""

    class Sloppy:
        quota_weight = 2.5

    request = APIRequestFactory().get("/api/demo/ping")
    with pytest.raises(TypeError, match=r"Sloppy\.quota_weight gave 2\.5"):
        QuotaThrottle().get_weight(request, Sloppy())


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [
        ("/t/priced?est=NaN", TypeError, r"PricedView\.get_quota_cost\(\) gave Decimal\('NaN'\)"),
        ("/t/priced?est=Infinity", TypeError, r"PricedView\.get_quota_cost\(\) gave Decimal\('Infinity'\)"),
    ],
)
@pytest.mark.redis
def test_a_non_number_weight_or_cost_is_the_views_mistake(free, redis_client, path, error, message):
    """A view's hook must never give a non-number: an error naming the view (a server error for the
    client), raised before Redis is asked; the breaker stays closed."""
    EndpointLimitFactory(plan=free, name="weighted", scope="weighted", rates="10/min", algorithm="fixed_window")
    key = issue_key(plan=free)
    api = APIClient()  # raises what the view raised
    get(api, "/api/demo/ping", key)  # rules and key cached
    calls = script_calls(redis_client)
    with pytest.raises(error, match=message):
        get(api, path, key)
    assert script_calls(redis_client) == calls
    assert not default_engine.runtime().guard.breaker.is_open
    assert get(api, "/t/weighted?w=1", key).status_code == 200


def test_an_actual_cost_out_of_bounds_names_the_view(free, settings, caplog):
    """request.quota_cost is set by the view's code after it ran: out of bounds, a 500 problem (no exception
    escapes) and an error log name the view and the value."""
    settings.QUOTAS = {**settings.QUOTAS, "MAX_REQUEST_COST": 100}
    key = issue_key(plan=free)
    for actual in ("100.01", "-1"):
        response = get(APIClient(), f"/t/priced?est=1&actual={actual}", key)  # would raise what the view raised
        assert response.status_code == 500
        assert f"PricedView set request.quota_cost Decimal('{actual}')" in response.json()["detail"]
        assert f"PricedView set request.quota_cost Decimal('{actual}')" in caplog.text


def test_unknown_keys_cost_one_query_each_and_never_evict_known_keys(client, free, settings, django_assert_num_queries):
    """A guesser's distinct keys go to a small cache of their own; a known key stays cached (no query)."""
    from quotas.engine import default_engine

    settings.QUOTAS = {**settings.QUOTAS, "CLIENT_CACHE_SIZE": 2}
    default_engine.reset()
    key = issue_key(plan=free)
    assert get(client, "/api/demo/ping", key).status_code == 200  # rules and the key loaded
    for i in range(5):
        assert get(client, "/api/demo/ping", f"qk_guess_{i}").status_code == 401
    with django_assert_num_queries(0):
        assert get(client, "/api/demo/ping", "qk_guess_1").status_code == 401  # remembered as unknown
        assert get(client, "/api/demo/ping", key).status_code == 200  # still cached


def test_a_key_first_seen_as_unknown_works_as_soon_as_it_is_issued(client, free):
    from plans.models import APIKey
    from tests.factories import SubscriptionFactory

    raw = "qk_" + "n" * 40
    assert get(client, "/api/demo/ping", raw).status_code == 401
    APIKey.issue(SubscriptionFactory(plan=free), raw=raw)  # bumps the rules version on commit
    assert get(client, "/api/demo/ping", raw).status_code == 200
