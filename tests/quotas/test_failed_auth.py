"""Guessing is stopped, customers are not: failed authentications end in 429 + Retry-After for attempts
that cannot succeed, while valid API keys and browsers that signed in before are answered on their merits."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from plans.models import APIKey
from quotas.engine import default_engine
from quotas.internal_api import hash_api_key
from tests.factories import EndpointLimitFactory, PlanFactory, SubscriptionFactory, UserFactory, issue_key
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def free(db):
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="global", rates="1000/min")
    return plan


@pytest.fixture
def tight(settings):
    """Three failures per address, two per username and per trusted device, per 10 minutes."""
    limits = {"address": "3/10min", "username": "2/10min", "device": "2/10min"}
    settings.QUOTAS = {**settings.QUOTAS, "FAILED_AUTH_LIMITS": limits}


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def assert_throttled_problem(response) -> None:
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 900  # the longest default window: 15 minutes
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["reason"] == "failed_authentications"


# Committed rows: the set of usable keys is read on a thread of its own (RulesCache.may_know_key), whose database
# connection does not see a test transaction's key; it would read the set without it as current and refuse the key.
@pytest.mark.django_db(transaction=True)
def test_guessing_api_keys_is_refused_after_the_limit_but_a_valid_key_is_answered(free, tight):
    api, good = APIClient(), issue_key(plan=free)
    codes = [api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR="203.0.113.5").status_code
             for i in range(3)]  # fmt: skip
    assert codes == [401, 401, 401]
    assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY="qk_guess_4", REMOTE_ADDR="203.0.113.5"))
    # A valid key is a 256-bit token, never a lucky guess: answered on its merits from the blocked address.
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=good, REMOTE_ADDR="203.0.113.5").status_code == 200
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=good, REMOTE_ADDR="198.51.100.1").status_code == 200
    # Anonymous requests (no credentials) from that address are not authentication attempts.
    assert api.get("/api/demo/ping", REMOTE_ADDR="203.0.113.5").status_code == 200


def test_limits_turned_off_keep_guessing_refused(free, settings):
    """QUOTAS['ENABLED'] False turns quotas off, not brute-force protection: with an address limit of 9, nine
    unknown keys get 401 and the tenth 429 (only FAILED_AUTH_LIMITS turns those limits off)."""
    limits = {"address": "9/10min", "username": "10/15min", "device": "10/15min"}
    settings.QUOTAS = {**settings.QUOTAS, "ENABLED": False, "FAILED_AUTH_LIMITS": limits}
    api = APIClient()
    codes = [api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_off_{i}", REMOTE_ADDR="203.0.113.9").status_code
             for i in range(9)]  # fmt: skip
    assert codes == [401] * 9
    assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY="qk_off_9", REMOTE_ADDR="203.0.113.9"))
    settings.QUOTAS = {**settings.QUOTAS, "FAILED_AUTH_LIMITS": None}
    assert api.get("/api/demo/ping", HTTP_X_API_KEY="qk_off_10", REMOTE_ADDR="203.0.113.9").status_code == 401


def test_the_usage_api_counts_bad_keys_too(free, tight):
    api = APIClient()
    for i in range(3):
        assert api.get("/api/v1/usage/", HTTP_X_API_KEY=f"qk_bad_{i}", REMOTE_ADDR="203.0.113.6").status_code == 401
    assert_throttled_problem(api.get("/api/v1/usage/", HTTP_X_API_KEY="qk_bad_x", REMOTE_ADDR="203.0.113.6"))


def test_wrong_basic_passwords_are_refused_after_the_limit_then_the_right_one_too(free, tight):
    UserFactory(username="alice", password=PASSWORD)
    api = APIClient()
    for _ in range(2):
        wrong = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", "nope"), REMOTE_ADDR="203.0.113.7")
        assert wrong.status_code == 401
    assert_throttled_problem(
        api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", "nope"), REMOTE_ADDR="203.0.113.7")
    )
    # Per username: the right password from another address is refused too while the block lasts.
    assert_throttled_problem(
        api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", PASSWORD), REMOTE_ADDR="198.51.100.2")
    )
    # Another user from a fresh address is not concerned.
    UserFactory(username="bob", password=PASSWORD)
    ok = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("bob", PASSWORD), REMOTE_ADDR="198.51.100.3")
    assert ok.status_code == 200


def test_admin_login_is_refused_with_429_after_too_many_wrong_passwords(tight):
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    browser = Client(REMOTE_ADDR="203.0.113.8")
    url = "/admin/login/?next=/admin/"
    for _ in range(2):
        page = browser.post(url, {"username": "ops", "password": "nope"})
        assert page.status_code == 200  # the form again, with Django's own error
    refused = browser.post(url, {"username": "ops", "password": "nope"})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert "Too many failed sign-ins" in refused.content.decode()
    right = browser.post(url, {"username": "ops", "password": PASSWORD})
    assert right.status_code == 429  # the right password is refused while blocked
    assert "_auth_user_id" not in browser.session


def test_a_human_who_mistypes_twice_signs_in_with_the_defaults(free):
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    browser = Client(REMOTE_ADDR="203.0.113.9")
    url = "/admin/login/?next=/admin/"
    for _ in range(2):
        assert browser.post(url, {"username": "ops", "password": "typo"}).status_code == 200
    assert browser.post(url, {"username": "ops", "password": PASSWORD}).status_code == 302


def test_the_limit_is_the_number_of_failures_allowed_then_unknown_keys_are_refused(free, tight):
    """ "3/10min": three wrong keys are answered 401; after them every unknown key is refused, revoked ones too."""
    api = APIClient()
    revoked = issue_key(plan=free)
    APIKey.objects.get(prefix=revoked[:10]).revoke()
    for i in range(3):
        assert api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR="203.0.113.10").status_code == 401
    assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY="qk_guess_x", REMOTE_ADDR="203.0.113.10"))
    assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY=revoked, REMOTE_ADDR="203.0.113.10"))


def test_a_password_block_holds_in_a_process_that_saw_none_of_the_failures(free, tight):
    """Another process (here: this one, having forgotten what it learnt) asks Redis before checking a
    password: the right password is refused there too, for the rest of the window."""
    from quotas.identity.auth_failures import failed_auth

    UserFactory(username="alice", password=PASSWORD, is_staff=True)
    api = APIClient()
    for _ in range(2):
        wrong = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", "nope"), REMOTE_ADDR="203.0.113.11")
        assert wrong.status_code == 401
    failed_auth.clear()  # what a process that served none of these requests knows
    assert_throttled_problem(
        api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("alice", PASSWORD), REMOTE_ADDR="198.51.100.11")
    )
    failed_auth.clear()
    refused = Client(REMOTE_ADDR="198.51.100.12").post(
        "/admin/login/?next=/admin/", {"username": "alice", "password": PASSWORD}
    )
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 600


def test_while_redis_is_down_failures_are_counted_in_the_process(tight, redis_server, caplog, set_quotas):
    """Authentication does not depend on Redis, and an outage does not open the door to guessing: each process
    enforces its LOCAL_SHARE of each limit itself (here all of it), logged once, counted as "local"."""
    from prometheus_client import REGISTRY

    set_quotas(LOCAL_SHARE=1.0)
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    url = "/admin/login/?next=/admin/"

    def local() -> float:
        return REGISTRY.get_sample_value("quota_failed_authentications_total", {"outcome": "local"}) or 0.0

    def sign_in(address: str, password: str):
        return Client(REMOTE_ADDR=address).post(url, {"username": "ops", "password": password})

    before = local()
    redis_server.stop()
    try:
        # A mistyped password, then the right one: signed in.
        assert sign_in("203.0.113.12", "nope").status_code == 200
        assert sign_in("203.0.113.12", PASSWORD).status_code == 302
        # A guesser: the username's limit (2) is used up by its second failure, so the third attempt is refused,
        # the right password included, from any address.
        guesser = Client(REMOTE_ADDR="203.0.113.13")
        assert guesser.post(url, {"username": "ops", "password": "guess"}).status_code == 200
        refused = guesser.post(url, {"username": "ops", "password": "guess"})
        assert refused.status_code == 429
        assert 1 <= int(refused["Retry-After"]) <= 600
        assert sign_in("198.51.100.13", PASSWORD).status_code == 429
    finally:
        redis_server.start()
    assert local() - before == 4  # two failures, each per address and per username
    logged = [r for r in caplog.records if "while Redis is unreachable" in r.getMessage()]
    assert len(logged) == 1


ADMIN_LOGIN = "/admin/login/?next=/admin/"


def signed_in_browser(username: str, address: str) -> Client:
    """A browser that has signed in as ``username`` (so it holds a trusted-device cookie), then signed out."""
    browser = Client(REMOTE_ADDR=address)
    response = browser.post(ADMIN_LOGIN, {"username": username, "password": PASSWORD})
    assert response.status_code == 302
    assert response.cookies["quota_device"]["httponly"]
    browser.post("/admin/logout/")
    assert "_auth_user_id" not in browser.session
    return browser


def wait_for_known_keys(version: str | None = None) -> None:
    """Wait until this process has read every usable key's hash in the background (as of ``version``)."""
    rules = default_engine.runtime().rules
    # Longer than the database pool's 10 s timeout: a read that found the pool busy (a previous test's
    # threads) is tried again by the poller every second until it gets a connection.

    def read() -> bool:
        known = rules.known_keys
        return known is not None and (version is None or known.version == version)

    assert wait_until(read, 45, every=0.01), f"the usable keys were not read again in time (as of version {version})"


# transaction=True: the usable keys are read on a thread of their own, which sees committed rows only.
@pytest.mark.django_db(transaction=True)
def test_45_unknown_keys_then_a_valid_key_from_the_same_address_is_admitted(free, django_assert_num_queries):
    """With the default limits (30 per address in 10 minutes): a guesser cannot lock out a customer at its address,
    and once blocked its guesses are refused without a database query."""
    api, good = APIClient(), issue_key(plan=free)
    codes = [api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR="192.0.2.45").status_code
             for i in range(45)]  # fmt: skip
    assert codes == [401] * 30 + [429] * 15
    wait_for_known_keys()
    with django_assert_num_queries(0):
        assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY="qk_guess_46", REMOTE_ADDR="192.0.2.45"))
    ok = api.get("/api/demo/ping", HTTP_X_API_KEY=good, REMOTE_ADDR="192.0.2.45")
    assert ok.status_code == 200
    assert ok["RateLimit-Policy"]


@pytest.mark.django_db(transaction=True)
def test_a_key_issued_while_its_address_is_blocked_works_at_once(free, tight):
    api = APIClient()
    for i in range(4):
        api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR="192.0.2.46")
    fresh = issue_key(plan=free)  # bumps the rules version: the known keys are read again
    assert api.get("/api/demo/ping", HTTP_X_API_KEY=fresh, REMOTE_ADDR="192.0.2.46").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_key_another_process_issued_after_the_keys_were_read_is_admitted_at_once(
    free, tight, set_quotas, redis_client
):
    """This process read the usable keys, then another process issued a key and bumped the rules version, which
    this process's poller has not seen yet (here: it polls once a minute). The new key still authenticates from
    the blocked address, and the guesses around it are still refused."""
    set_quotas(RULES_CHECK_INTERVAL=60)
    sub = SubscriptionFactory(plan=free)
    api = APIClient()
    for i in range(4):
        api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR="192.0.2.47")
    rules = default_engine.runtime().rules
    wait_for_known_keys()
    read_at = rules.known_keys.version
    # What issuing a key in another process does here: the row committed, the version bumped in Redis; no
    # signal reaches this process.
    raw = "qk_" + "another-process-issued-this-key-0123456789"
    APIKey.objects.bulk_create([APIKey(subscription=sub, prefix=raw[:10], key_hash=hash_api_key(raw))])
    redis_client.incr(rules.version_counter.key)
    assert rules.known_keys.version == read_at  # this process has not read the keys again yet
    assert hash_api_key(raw) not in rules.known_keys

    assert api.get("/api/demo/ping", HTTP_X_API_KEY=raw, REMOTE_ADDR="192.0.2.47").status_code == 200
    assert_throttled_problem(api.get("/api/demo/ping", HTTP_X_API_KEY="qk_guess_x", REMOTE_ADDR="192.0.2.47"))
    # The set is read again in the background, and then holds the new key.
    wait_for_known_keys(version=redis_client.get(rules.version_counter.key).decode())
    assert hash_api_key(raw) in rules.known_keys


def test_36_wrong_passwords_from_12_addresses_do_not_lock_out_the_owners_browser(free):
    """The default limits (10 per username in 15 minutes): the username is under attack, yet the browser that
    signed in before signs in with the right password; a browser that never did is refused until the window ends."""
    UserFactory(username="root", password=PASSWORD, is_staff=True, is_superuser=True)
    owner = signed_in_browser("root", "198.51.100.20")
    codes = []
    for n in range(36):
        attacker = Client(REMOTE_ADDR=f"203.0.113.{100 + n % 12}")
        codes.append(attacker.post(ADMIN_LOGIN, {"username": "root", "password": f"guess-{n}"}).status_code)
    assert codes == [200] * 10 + [429] * 26
    signed_in = owner.post(ADMIN_LOGIN, {"username": "root", "password": PASSWORD})
    assert signed_in.status_code == 302
    assert owner.session["_auth_user_id"]
    # A new browser (no device cookie) is refused while the username is under attack, the right password included.
    stranger = Client(REMOTE_ADDR="198.51.100.21").post(ADMIN_LOGIN, {"username": "root", "password": PASSWORD})
    assert stranger.status_code == 429
    # HTTP Basic sends no cookie: a script is a new browser (it should use an API key).
    basic_attempt = APIClient().get("/api/v1/usage/", HTTP_AUTHORIZATION=basic("root", PASSWORD))
    assert_throttled_problem(basic_attempt)


def test_a_guesser_at_the_owners_address_does_not_lock_out_the_owners_browser(free, tight):
    """One NAT: the guesser's bad keys and passwords block the address, not the browser that signed in before."""
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    owner = signed_in_browser("ops", "192.0.2.50")
    api = APIClient()
    for i in range(5):
        api.get("/api/demo/ping", HTTP_X_API_KEY=f"qk_guess_{i}", REMOTE_ADDR="192.0.2.50")
    assert owner.post(ADMIN_LOGIN, {"username": "ops", "password": PASSWORD}).status_code == 302


def test_a_trusted_browser_has_a_limit_of_its_own(free, tight):
    """A stolen device cookie buys a guesser a few tries, not unlimited ones."""
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    browser = signed_in_browser("ops", "192.0.2.51")
    for _ in range(2):
        assert browser.post(ADMIN_LOGIN, {"username": "ops", "password": "nope"}).status_code == 200
    assert browser.post(ADMIN_LOGIN, {"username": "ops", "password": "nope"}).status_code == 429
    assert browser.post(ADMIN_LOGIN, {"username": "ops", "password": PASSWORD}).status_code == 429
    # Its failures counted against the device only: another browser for the same user is not concerned.
    other = Client(REMOTE_ADDR="192.0.2.52")
    assert other.post(ADMIN_LOGIN, {"username": "ops", "password": PASSWORD}).status_code == 302


def test_a_device_cookie_is_trusted_only_for_the_user_who_signed_in_and_only_when_signed(free, tight):
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    UserFactory(username="root", password=PASSWORD, is_staff=True)
    browser = signed_in_browser("ops", "192.0.2.53")
    for _ in range(3):  # "root" is under attack from elsewhere
        Client(REMOTE_ADDR="203.0.113.60").post(ADMIN_LOGIN, {"username": "root", "password": "nope"})
    # ops's browser never signed in as root: a new browser for root.
    assert browser.post(ADMIN_LOGIN, {"username": "root", "password": PASSWORD}).status_code == 429
    forged = Client(REMOTE_ADDR="192.0.2.54")
    forged.cookies["quota_device"] = browser.cookies["quota_device"].value[:-2] + "xx"
    for _ in range(3):
        Client(REMOTE_ADDR="203.0.113.61").post(ADMIN_LOGIN, {"username": "ops", "password": "nope"})
    assert forged.post(ADMIN_LOGIN, {"username": "ops", "password": PASSWORD}).status_code == 429
    assert browser.post(ADMIN_LOGIN, {"username": "ops", "password": PASSWORD}).status_code == 302


def test_a_loopback_peer_without_trusted_proxies_is_warned_about_once(free, caplog, monkeypatch):
    """Behind a proxy that is not trusted, every client shares the proxy's address: say which setting fixes it."""
    from quotas.identity import addresses

    monkeypatch.setattr(addresses, "_warned_local_peer", False)
    api = APIClient()
    for _ in range(3):
        api.get("/api/demo/ping", REMOTE_ADDR="127.0.0.1")
    warned = [r for r in caplog.records if "TRUSTED_PROXIES" in r.getMessage() and "loopback" in r.getMessage()]
    assert len(warned) == 1


def test_a_public_peer_or_a_trusted_proxy_is_not_warned_about(free, caplog, monkeypatch, set_quotas):
    from quotas.identity import addresses

    monkeypatch.setattr(addresses, "_warned_local_peer", False)
    APIClient().get("/api/demo/ping", REMOTE_ADDR="198.51.100.30")
    set_quotas(TRUSTED_PROXIES=["127.0.0.1/32"])
    APIClient().get("/api/demo/ping", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.31")
    assert not [r for r in caplog.records if "loopback or private" in r.getMessage()]


def test_sign_ins_refused_for_their_address_count_against_no_username(free, tight, redis_client):
    """One address that used up its limit cannot lock usernames out: an attempt refused for the address
    counts nothing and writes nothing, so each user still signs in from another address."""
    for name in ("alice", "bob", "carol"):
        UserFactory(username=name, password=PASSWORD)
    api = APIClient()
    for i in range(3):  # the address limit (3), spent on usernames nobody has
        wrong = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic(f"spray{i}", "x"), REMOTE_ADDR="203.0.113.20")
        assert wrong.status_code == 401
    keys_before = set(redis_client.scan_iter())
    for name in ("alice", "bob", "carol"):
        for _ in range(2):  # the username limit (2): refused for the address, so not counted against the name
            refused = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic(name, "x"), REMOTE_ADDR="203.0.113.20")
            assert_throttled_problem(refused)
    # A spray of usernames from the blocked address writes no Redis key.
    for i in range(20):
        api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic(f"random{i}", "x"), REMOTE_ADDR="203.0.113.20")
    assert set(redis_client.scan_iter()) == keys_before
    for name in ("alice", "bob", "carol"):
        ok = api.get("/api/v1/usage/", HTTP_AUTHORIZATION=basic(name, PASSWORD), REMOTE_ADDR="198.51.100.20")
        assert ok.status_code == 200, name


def test_admin_sign_ins_refused_for_their_address_count_against_no_username(tight):
    """The same through the admin's login form: the owner signs in from elsewhere with a new browser."""
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    guesser = Client(REMOTE_ADDR="203.0.113.21")
    url = "/admin/login/?next=/admin/"
    for i in range(3):
        assert guesser.post(url, {"username": f"spray{i}", "password": "x"}).status_code == 200
    for _ in range(3):
        assert guesser.post(url, {"username": "ops", "password": "x"}).status_code == 429
    owner = Client(REMOTE_ADDR="198.51.100.21")
    assert owner.post(url, {"username": "ops", "password": PASSWORD}).status_code == 302


def test_a_sign_in_refused_for_too_many_failures_ends_its_concurrency_lease(tight, settings):
    """A sign-in page limited by PathQuotaMiddleware to one request at a time: the attempt answered 429 for
    too many failures is settled like any other (its lease ended), so the next page view is not refused."""
    plan = PlanFactory(slug="free", is_default=True)
    EndpointLimitFactory(plan=plan, name="inflight", scope="signin", rates="1/30s", algorithm="concurrency")
    settings.QUOTAS = {**settings.QUOTAS, "PATH_LIMITS": [{"prefix": "/admin/login/", "scope": "signin"}]}
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "quotas.django.middleware.PathQuotaMiddleware"]
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    browser = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(2):
        assert browser.post(ADMIN_LOGIN, {"username": "ops", "password": "nope"}).status_code == 200
    refused = browser.post(ADMIN_LOGIN, {"username": "ops", "password": "nope"})
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.content.decode()
    assert browser.get(ADMIN_LOGIN).status_code == 200  # the form: no lease left behind
