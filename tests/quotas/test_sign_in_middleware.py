"""SignInThrottleMiddleware: a sign-in refused for too many failures becomes a 429 (a page or a problem, with
Retry-After), a browser that signed in gets its trusted-device cookie, sync and async alike; settings that list
only QuotaHeadersMiddleware (written before the two were split) still run, and check quotas.W007 says what they
miss."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.http import HttpResponse, JsonResponse
from django.test import Client, RequestFactory

from quotas.checks.front_doors import check_sign_in_middleware
from quotas.http.sign_in import SignInThrottleMiddleware
from quotas.identity import devices
from quotas.identity.auth_failures import refuse
from tests.factories import UserFactory

PASSWORD = "correct horse battery staple"
HEADERS = "quotas.middleware.QuotaHeadersMiddleware"
SIGN_IN = "quotas.middleware.SignInThrottleMiddleware"


def page(request):
    return HttpResponse("<form>sign in</form>", content_type="text/html; charset=utf-8")


def unauthorized(request):
    return JsonResponse({"detail": "bad credentials"}, status=401)


def failing(request):
    return HttpResponse("boom", status=500)


def refused_request(wait: int = 42):
    request = RequestFactory().post("/login/")
    refuse(request, wait)
    return request


def test_a_refused_browser_sign_in_is_answered_with_a_429_page():
    """The login form's HTML answer becomes a 429 page saying to wait, with Retry-After."""
    response = SignInThrottleMiddleware(page)(refused_request(42))
    assert response.status_code == 429
    assert response["Retry-After"] == "42"
    assert response["Content-Type"].startswith("text/html")
    assert "Try again in 42 seconds" in response.content.decode()


def test_a_refused_api_sign_in_is_answered_with_a_429_problem():
    """Any other answer (HTTP Basic's 401 here) becomes a failed_authentications problem+json."""
    response = SignInThrottleMiddleware(unauthorized)(refused_request(7))
    assert response.status_code == 429
    assert response["Retry-After"] == "7"
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["reason"] == "failed_authentications"


def test_a_server_error_and_an_unrefused_sign_in_are_left_as_they_are():
    """A 500 says more than the refusal; a request nobody refused keeps its answer."""
    assert SignInThrottleMiddleware(failing)(refused_request()).status_code == 500
    answer = SignInThrottleMiddleware(page)(RequestFactory().post("/login/"))
    assert answer.status_code == 200
    assert devices.COOKIE_NAME not in answer.cookies


def test_the_async_path_answers_a_refused_sign_in_alike():
    """Under ASGI (an async get_response) the middleware is a coroutine and answers the same 429, on the loop."""

    async def async_page(request):
        return page(request)

    middleware = SignInThrottleMiddleware(async_page)
    response = async_to_sync(middleware)(refused_request(9))
    assert response.status_code == 429
    assert response["Retry-After"] == "9"


def test_a_browser_that_signed_in_gets_its_trusted_device_cookie():
    """What devices.remember_sign_in prepared is set on the response: a signed cookie naming the user."""
    request = RequestFactory().post("/login/")
    devices.remember_sign_in(request, "alice")
    response = SignInThrottleMiddleware(page)(request)
    cookie = response.cookies[devices.COOKIE_NAME]
    assert cookie["httponly"] is True
    follow = RequestFactory().post("/login/")
    follow.COOKIES[devices.COOKIE_NAME] = cookie.value
    assert devices.trusted_device(follow, "alice") is not None
    assert devices.trusted_device(follow, "bob") is None


@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_settings_listing_only_the_headers_middleware_still_run_and_are_warned(settings):
    """Settings written before the split: the project runs, a blocked sign-in is still refused (the backend
    refuses it before any password check) but answered like a wrong password, not 429, and no device cookie is
    set; W007 names the middleware to add."""
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != SIGN_IN]
    settings.QUOTAS = {**settings.QUOTAS, "FAILED_AUTH_LIMITS": {"address": "3/10min", "username": "2/10min"}}
    assert [m.id for m in check_sign_in_middleware()] == ["quotas.W007"]
    assert SIGN_IN in check_sign_in_middleware()[0].hint
    UserFactory(username="ops", password=PASSWORD, is_staff=True)
    browser = Client(REMOTE_ADDR="203.0.113.31")
    url = "/admin/login/?next=/admin/"
    answers = [browser.post(url, {"username": "ops", "password": "nope"}).status_code for _ in range(3)]
    assert answers == [200, 200, 200]  # the third was refused, and said nothing of it
    assert browser.post(url, {"username": "ops", "password": PASSWORD}).status_code == 200  # blocked: the form
    assert "_auth_user_id" not in browser.session
    UserFactory(username="dev", password=PASSWORD, is_staff=True)
    owner = Client(REMOTE_ADDR="198.51.100.31")
    signed_in = owner.post(url, {"username": "dev", "password": PASSWORD})
    assert signed_in.status_code == 302
    assert devices.COOKIE_NAME not in signed_in.cookies  # with SignInThrottleMiddleware it would be set


@pytest.mark.parametrize(
    ("middleware", "warned"),
    [
        ([SIGN_IN, HEADERS], False),
        (["quotas.http.sign_in.SignInThrottleMiddleware", "quotas.http.middleware.QuotaHeadersMiddleware"], False),
        ([HEADERS], True),
        (["quotas.http.middleware.QuotaHeadersMiddleware"], True),
        ([], False),  # no quota middleware at all: W002's business when QuotaThrottle is used
    ],
)
def test_w007_warns_when_only_the_headers_middleware_is_listed(settings, middleware, warned):
    """Either import path counts; nothing is said of a project that lists neither."""
    settings.MIDDLEWARE = middleware
    assert [m.id for m in check_sign_in_middleware()] == (["quotas.W007"] if warned else [])


@pytest.mark.django_db
@pytest.mark.urls("tests.urls")
def test_with_both_listed_a_browser_that_signs_in_gets_the_cookie(settings):
    """The project's settings (SignInThrottleMiddleware before QuotaHeadersMiddleware): the admin sign-in sets it."""
    assert settings.MIDDLEWARE.index(SIGN_IN) < settings.MIDDLEWARE.index(HEADERS)
    UserFactory(username="dev", password=PASSWORD, is_staff=True)
    signed_in = Client(REMOTE_ADDR="198.51.100.32").post(
        "/admin/login/?next=/admin/", {"username": "dev", "password": PASSWORD}
    )
    assert signed_in.status_code == 302
    assert devices.COOKIE_NAME in signed_in.cookies
