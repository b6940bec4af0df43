"""The usage API's own limit: per client, its scope's plan limits or QUOTAS['USAGE_API_RATE'], nothing else."""

from __future__ import annotations

import json

import pytest

from tests.factories import EndpointLimitFactory, issue_key

from .conftest import send
from .test_api import problem, tag_of

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

CURRENT = "/api/v1/usage/current"
REFUSALS = "/api/v1/usage/refusals"


def assert_rate_limit_headers(response, policy: str) -> None:
    assert response["RateLimit-Policy"].startswith(f'"{policy}"')
    assert response["RateLimit"].startswith(f'"{policy}"')


def test_hammering_the_usage_api_past_the_default_rate_gets_429(api, free):
    """120 reads a minute per client by default: the 121st gets 429 problem+json with Retry-After and the
    RateLimit headers; another client still reads its own."""
    key, other = issue_key(plan=free), issue_key(plan=free)
    own = {"client": tag_of(key)}
    for n in range(120):
        response = api.get(REFUSALS, own, HTTP_X_API_KEY=key)
        assert response.status_code == 200, n
    assert_rate_limit_headers(response, "usage_api")
    refused = api.get(REFUSALS, own, HTTP_X_API_KEY=key)
    body = problem(refused, 429)
    assert body["reason"] == "rate_limited"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert_rate_limit_headers(refused, "usage_api")
    assert api.get(CURRENT, HTTP_X_API_KEY=other).status_code == 200


def test_the_rate_is_a_setting_and_limits_every_usage_endpoint_together(api, free, set_quotas):
    set_quotas(USAGE_API_RATE="3/min")
    key = issue_key(plan=free)
    codes = [api.get(path, HTTP_X_API_KEY=key).status_code for path in ("/api/v1/usage/", CURRENT, CURRENT, CURRENT)]
    assert codes == [200, 200, 200, 429]


def test_a_plan_limit_of_scope_usage_api_replaces_the_default(api, free):
    EndpointLimitFactory(plan=free, name="usage-reads", scope="usage_api", rates="2/min", algorithm="fixed_window")
    key = issue_key(plan=free)
    first = api.get(CURRENT, HTTP_X_API_KEY=key)
    assert_rate_limit_headers(first, "usage-reads")
    assert "usage_api" not in first["RateLimit-Policy"]
    assert api.get(CURRENT, HTTP_X_API_KEY=key).status_code == 200
    refused = api.get(CURRENT, HTTP_X_API_KEY=key)
    assert refused.status_code == 429
    assert json.loads(refused.content)["retry_after"] >= 1


def test_a_client_at_its_api_limit_still_reads_its_usage_and_reading_is_not_counted(api, free):
    """The plan's 5/min applies to the API, not to the usage API; reading usage adds nothing to it."""
    key = issue_key(plan=free)
    assert send(api, key, 6) == {200: 5, 429: 1}
    before = api.get("/api/v1/usage/", HTTP_X_API_KEY=key).json()["totals"]
    current = api.get(CURRENT, HTTP_X_API_KEY=key)
    assert current.status_code == 200
    assert "global" not in current["RateLimit-Policy"]
    after = api.get("/api/v1/usage/", HTTP_X_API_KEY=key).json()["totals"]
    assert after == before
    assert (after["allowed"], after["denied_by"]["rate"]) == (5, 1)


def test_no_default_rate_leaves_the_usage_api_unlimited(api, free, set_quotas):
    set_quotas(USAGE_API_RATE=None)
    key = issue_key(plan=free)
    responses = [api.get(CURRENT, HTTP_X_API_KEY=key) for _ in range(5)]
    assert [r.status_code for r in responses] == [200] * 5
    assert "RateLimit-Policy" not in responses[-1]


def test_anonymous_callers_are_limited_by_address_before_the_401(api, free, set_quotas):
    set_quotas(USAGE_API_RATE="2/min")
    codes = [api.get(CURRENT, REMOTE_ADDR="203.0.113.20").status_code for _ in range(3)]
    assert codes == [401, 401, 429]
    assert api.get(CURRENT, REMOTE_ADDR="203.0.113.21").status_code == 401


def test_hammering_the_usage_api_never_bans_the_client_from_the_api(api, free, set_quotas):
    """The plan bans clients refused more than 3 times in a minute; refusals of the usage API do not count."""
    free.ban_threshold, free.ban_window, free.ban_durations = 3, 60, "600"
    free.save()
    set_quotas(USAGE_API_RATE="1/min")
    key = issue_key(plan=free)
    codes = [api.get(CURRENT, HTTP_X_API_KEY=key).status_code for _ in range(8)]
    assert codes == [200] + [429] * 7
    assert send(api, key, 1) == {200: 1}
