"""CSRF at a GraphQL endpoint, whichever library serves it (issue 45, item 8): a library's test module imports
these tests beside behaviour.py's, and its urls serve ``/graphql`` and ``/graphql-no-csrf`` (``quota_csrf=False``).

Every request goes through Django's test client with ``enforce_csrf_checks=True``, as a browser's would go
through ``CsrfViewMiddleware``: the ``browser`` fixture (test_strawberry_async.py gives its ASGI client).
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client

from tests.factories import UserFactory, issue_key
from tests.quotas.graphql.behaviour import CHEAP, CHEAP_DATA, docs_module, post, problem_of, remaining

__all__ = [
    "browser",
    "signed_in",
    "test_a_signed_in_browsers_forged_post_is_refused_before_it_spends",
    "test_a_signed_in_browsers_get_query_needs_no_csrf_token",
    "test_a_signed_in_browsers_post_with_its_csrf_token_is_answered",
    "test_an_anonymous_post_needs_no_csrf_token",
    "test_an_api_key_client_needs_no_csrf_token",
    "test_quota_csrf_false_turns_the_check_off",
    "test_the_check_holds_with_quotas_off",
    "test_the_graphiql_page_gives_a_signed_in_browser_its_csrf_cookie",
]

#: A CSRF secret as Django's csrftoken cookie carries it (32 letters); a page's script sends it as X-CSRFToken.
SECRET = "k" * 16 + "Q" * 16


@pytest.fixture
def browser() -> Client:
    """A client whose requests meet Django's CSRF checks, as a browser's do."""
    return Client(enforce_csrf_checks=True, raise_request_exception=False)


@pytest.fixture
def signed_in(browser, db):
    """``browser`` with a signed-in session and the csrftoken cookie a page of the site gave it."""
    browser.force_login(UserFactory())
    browser.cookies[settings.CSRF_COOKIE_NAME] = SECRET
    return browser


def assert_docs_snippet_handles_csrf(monkeypatch, settings, signed_in, plan, name: str, source: str) -> None:
    """docs/graphql.md's snippet ``source``, with no csrf_exempt, served as the project's urls.py: a signed-in
    browser's POST of { hello } is a 403 csrf-failed without its token and answered with it; an API key client
    needs none."""
    assert "csrf_exempt" not in source  # the views handle CSRF: a wrapper only hides that from the reader
    docs_module(monkeypatch, name, source)
    settings.ROOT_URLCONF = name
    hello = {"data": {"hello": "world"}}
    assert problem_of(post(signed_in, "{ hello }"))["reason"] == "csrf_failed"
    answered = post(signed_in, "{ hello }", HTTP_X_CSRFTOKEN=SECRET)
    assert (answered.status_code, json.loads(answered.content)) == (200, hello)
    assert remaining(answered) == 99
    api = post(Client(enforce_csrf_checks=True), "{ hello }", HTTP_X_API_KEY=issue_key(plan=plan))
    assert (api.status_code, json.loads(api.content)) == (200, hello)


FORGERIES = {
    "no token": ({}, "CSRF token missing."),
    "a wrong token": ({"HTTP_X_CSRFTOKEN": "w" * 32}, "CSRF token from the 'X-Csrftoken' HTTP header incorrect."),
    "another site's origin": (
        {"HTTP_X_CSRFTOKEN": SECRET, "HTTP_ORIGIN": "https://evil.example"},
        "Origin checking failed - https://evil.example does not match any trusted origins.",
    ),
}


@pytest.mark.parametrize("forgery", FORGERIES, ids=list(FORGERIES))
def test_a_signed_in_browsers_forged_post_is_refused_before_it_spends(signed_in, plan, forgery):
    """What a page of another site can make a signed-in browser send (its session cookie, no token or a wrong
    one, or that site's Origin): 403 csrf-failed as a GraphQL error naming Django's reason, nothing run, nothing
    counted (no RateLimit header; the next query, with the token, leaves 100 - 3). Before issue 45 the views
    were wrapped in csrf_exempt, and it ran and spent the user's quota."""
    extra, reason = FORGERIES[forgery]
    refused = post(signed_in, CHEAP, **extra)
    assert refused.status_code == 403, refused.content
    assert refused["Content-Type"] == "application/json"
    problem = problem_of(refused)
    assert (problem["type"], problem["status"], problem["reason"]) == ("/problems/csrf-failed", 403, "csrf_failed")
    assert problem["csrf_reason"] == reason
    assert "data" not in json.loads(refused.content)
    assert "RateLimit" not in refused
    answered = post(signed_in, CHEAP, HTTP_X_CSRFTOKEN=SECRET)
    assert answered.status_code == 200
    assert remaining(answered) == 97


def test_a_signed_in_browsers_post_with_its_csrf_token_is_answered(signed_in, plan):
    """The session user's page sends the csrftoken cookie's value as X-CSRFToken: answered, and spent (3)."""
    response = post(signed_in, CHEAP, HTTP_X_CSRFTOKEN=SECRET)
    assert response.status_code == 200, response.content
    assert json.loads(response.content) == CHEAP_DATA
    assert remaining(response) == 97


def test_a_signed_in_browsers_get_query_needs_no_csrf_token(signed_in, plan):
    """Django's rule: GET is safe, so a query in a GET's URL runs without a token (and spends its 3)."""
    response = signed_in.get("/graphql", {"query": CHEAP})
    assert response.status_code == 200, response.content
    assert json.loads(response.content) == CHEAP_DATA
    assert remaining(response) == 97


@pytest.mark.parametrize("session", [False, True], ids=["no session", "beside a session"])
def test_an_api_key_client_needs_no_csrf_token(browser, plan, session):
    """A POST carrying an API key (a header no page of another site can make a browser send) needs no token,
    with or without a session cookie beside it: answered, counted against the key. Before issue 45, without
    csrf_exempt around the view, Django's middleware refused it (403)."""
    key = issue_key(plan=plan)
    if session:
        browser.force_login(UserFactory())
    response = post(browser, CHEAP, HTTP_X_API_KEY=key)
    assert response.status_code == 200, response.content
    assert remaining(response) == 97


def test_an_anonymous_post_needs_no_csrf_token(browser, plan):
    """No session user, no key: nothing a forged request could act as, so no check (DRF's rule too)."""
    response = post(browser, CHEAP)
    assert response.status_code == 200, response.content
    assert remaining(response) == 97


def test_quota_csrf_false_turns_the_check_off(signed_in, plan):
    """quota_csrf=False: the view is exempt altogether, as csrf_exempt made it; a session POST without a token
    runs."""
    response = post(signed_in, CHEAP, path="/graphql-no-csrf")
    assert response.status_code == 200, response.content
    assert remaining(response) == 97


def test_the_check_holds_with_quotas_off(signed_in, plan, set_quotas):
    """QUOTAS['ENABLED'] = False takes the gate out, not the CSRF check: the view is still exempt from the
    middleware's, so its own must run."""
    set_quotas(ENABLED=False)
    assert post(signed_in, CHEAP).status_code == 403
    assert post(signed_in, CHEAP, HTTP_X_CSRFTOKEN=SECRET).status_code == 200


def test_the_graphiql_page_gives_a_signed_in_browser_its_csrf_cookie(browser, plan):
    """A signed-in user opening the endpoint in a browser (GET, Accept: text/html) gets the csrftoken cookie
    (graphene-django sets it on every answer; strawberry's GraphiQL page through our view, since issue 45), so
    GraphiQL's POSTs, which send it back as X-CSRFToken, are answered (the page spent 1, the query 3)."""
    browser.force_login(UserFactory())
    page = browser.get("/graphql", HTTP_ACCEPT="text/html")
    assert page.status_code < 500
    token = browser.cookies[settings.CSRF_COOKIE_NAME].value
    response = post(browser, CHEAP, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200, response.content
    assert remaining(response) == 96
