"""RateLimit headers per draft-ietf-httpapi-ratelimit-headers, and problem type URIs, as a client sees them."""

from __future__ import annotations

import json
import math
import re
import time
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from plans.models import PeriodQuota
from quotas import problems
from quotas.checks import check_settings
from quotas.engine import default_engine
from quotas.http.context import verdict_of
from tests.factories import EndpointLimitFactory, PlanFactory, issue_key

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.urls")]

ROOT = Path(__file__).resolve().parents[2]
#: The documentation page that lists the problem types.
RESPONSES_PAGE = ROOT / "docs" / "responses.md"


@pytest.fixture
def plan(db):
    return PlanFactory(slug="free", monthly_price=Decimal("0"), is_default=True)


@pytest.fixture
def client():
    return APIClient(raise_request_exception=False)


def get(client, path, key, **extra):
    return client.get(path, HTTP_X_API_KEY=key, **extra)


def items(field: str) -> dict[str, str]:
    """A structured-field list by item name: {'"global"': 'q=3;w=60', ...}."""
    return dict(item.split(";", 1) for item in field.split(", "))


def param(item: str, name: str) -> str | None:
    found = re.search(rf"(?:^|;){re.escape(name)}=([^;]+)", item)
    return found.group(1) if found else None


class TestUnitsAndWindows:
    def test_a_concurrency_limit_has_its_unit_and_no_window(self, client, plan):
        """qu="concurrent-requests", no w (30 s is a lease's lifetime), and no t while slots are free."""
        EndpointLimitFactory(plan=plan, name="inflight", rates="2/30s", algorithm="concurrency")
        response = get(client, "/api/demo/ping", issue_key(plan=plan))
        assert response.status_code == 200
        assert response["RateLimit-Policy"] == '"inflight";q=2;qu="concurrent-requests"'
        assert response["RateLimit"] == '"inflight";r=1'

    def test_a_refused_concurrent_request_gets_t_no_later_than_retry_after(self, client, plan):
        """All slots held: 429 with r=0 and t equal to Retry-After (the draft: Retry-After not before t)."""
        EndpointLimitFactory(plan=plan, name="inflight", rates="1/30s", algorithm="concurrency")
        key = issue_key(plan=plan)
        first = get(client, "/api/demo/ping", key)
        decision = verdict_of(first.wsgi_request).decision
        held = default_engine.runtime().guard.decide(
            decision.tag, [s.window for s in decision.states], request_id="held"
        )
        assert held.allowed  # another request of this client, still in flight
        refused = get(client, "/api/demo/ping", key)
        assert refused.status_code == 429
        assert refused["RateLimit-Policy"] == '"inflight";q=1;qu="concurrent-requests"'
        assert refused["RateLimit"] == f'"inflight";r=0;t={refused["Retry-After"]}'
        body = json.loads(refused.content)
        assert "1 request in flight at once" in body["detail"]

    def test_an_unweighted_rate_says_nothing_about_units(self, client, plan):
        """Requests are the draft's default unit: no qu, no weight."""
        EndpointLimitFactory(plan=plan, name="global", rates="3/min", algorithm="fixed_window")
        response = get(client, "/api/demo/ping", issue_key(plan=plan))
        assert response["RateLimit-Policy"] == '"global";q=3;w=60'
        assert re.fullmatch(r'"global";r=2;t=\d+', response["RateLimit"])

    def test_a_views_weight_is_stated_as_units(self, client, plan):
        """A view spending 3 units: qu="requests" (the closest registered unit) and quotas-weight=3."""
        EndpointLimitFactory(plan=plan, name="heavy", scope="weighted", rates="10/min", algorithm="fixed_window")
        key = issue_key(plan=plan)
        response = get(client, "/t/weighted?w=3", key)
        assert response.status_code == 200
        assert response["RateLimit-Policy"] == '"heavy";q=10;qu="requests";w=60'
        assert re.fullmatch(r'"heavy";r=7;t=\d+;quotas-weight=3', response["RateLimit"])
        light = get(client, "/t/weighted?w=1", key)
        assert light["RateLimit-Policy"] == '"heavy";q=10;w=60'
        assert re.fullmatch(r'"heavy";r=6;t=\d+', light["RateLimit"])

    def test_a_limits_own_weight_is_stated_as_units(self, client, plan):
        """A limit counting 2 units a request says so on every response."""
        EndpointLimitFactory(plan=plan, name="global", rates="10/min", algorithm="token_bucket", weight=2)
        response = get(client, "/api/demo/ping", issue_key(plan=plan))
        assert response["RateLimit-Policy"] == '"global";q=10;qu="requests";w=60'
        assert param(items(response["RateLimit"])['"global"'], "quotas-weight") == "2"
        assert param(items(response["RateLimit"])['"global"'], "r") == "8"

    def test_a_refused_weighted_request_names_units_in_its_body(self, client, plan):
        EndpointLimitFactory(plan=plan, name="heavy", scope="weighted", rates="4/min", algorithm="fixed_window")
        key = issue_key(plan=plan)
        assert get(client, "/t/weighted?w=3", key).status_code == 200
        refused = get(client, "/t/weighted?w=3", key)
        assert refused.status_code == 429
        assert "allows 4 units per minute" in json.loads(refused.content)["detail"]
        assert re.fullmatch(r'"heavy";r=1;t=\d+;quotas-weight=3', refused["RateLimit"])

    @pytest.mark.parametrize(
        ("unit", "policy"),
        [
            ("requests", '"monthly";q=100;quotas-period="month"'),
            ("weight", '"monthly";q=100;qu="requests";quotas-period="month"'),
        ],
    )
    def test_a_calendar_period_has_no_window_but_names_its_period(self, client, plan, unit, policy):
        """A month is 28 to 31 days: no w; its reset (t) is the period's end; weight units say qu."""
        PeriodQuota.objects.create(plan=plan, name="monthly", period="month", units=100, unit=unit)
        response = get(client, "/api/demo/ping", issue_key(plan=plan))
        assert response.status_code == 200
        assert response["RateLimit-Policy"] == policy
        state = items(response["RateLimit"])['"monthly"']
        assert param(state, "r") == "99"
        assert 0 < int(param(state, "t")) <= 31 * 86400


class TestAdaptiveReduction:
    def publish(self, redis_client, plan, multiplier):
        redis_client.set("quota:v1:adaptive:multipliers", json.dumps({str(plan.pk): multiplier}))
        runtime = default_engine.runtime()
        runtime.rules.current()
        runtime.multipliers.refresh(runtime.store.multipliers)

    def test_the_policy_stays_stable_and_r_shows_the_reduction(self, client, plan, redis_client):
        """Before and under a 0.5 multiplier the policy is the same; r counts from the reduced quota."""
        EndpointLimitFactory(plan=plan, name="global", rates="10/min", algorithm="fixed_window")
        key = issue_key(plan=plan)
        before = get(client, "/api/demo/ping", key)
        self.publish(redis_client, plan, 0.5)
        during = [get(client, "/api/demo/ping", key) for _ in range(5)]
        assert {r["RateLimit-Policy"] for r in [before, *during]} == {'"global";q=10;w=60'}
        assert param(items(before["RateLimit"])['"global"'], "r") == "9"
        assert [param(items(r["RateLimit"])['"global"'], "r") for r in during[:4]] == ["3", "2", "1", "0"]
        refused = during[4]
        assert refused.status_code == 503
        body = json.loads(refused.content)
        assert (body["limit"]["quota"], body["limit"]["full_quota"]) == (5, 10)
        assert param(items(refused["RateLimit"])['"global"'], "r") == "0"


@pytest.mark.redis  # the store's clock and this process's both real, as in production
class TestRefusalsFromMemory:
    @pytest.mark.parametrize("algorithm", ["token_bucket", "fixed_window", "sliding_window_log"])
    def test_a_429_from_memory_repeats_what_redis_said(self, client, plan, algorithm):
        """The same request refused again from the in-process memory: same policy, r=0, the same reset."""
        EndpointLimitFactory(plan=plan, name="global", rates="3/min", algorithm=algorithm)
        key = issue_key(plan=plan)
        assert [get(client, "/api/demo/ping", key).status_code for _ in range(3)] == [200] * 3
        from_redis = get(client, "/api/demo/ping", key)
        started = time.monotonic()
        from_memory = get(client, "/api/demo/ping", key)
        late = math.ceil(time.monotonic() - started)  # a loaded machine may take a while between the two
        assert (from_redis.status_code, from_memory.status_code) == (429, 429)
        assert not verdict_of(from_redis.wsgi_request).decision.local
        assert verdict_of(from_memory.wsgi_request).decision.local
        assert from_memory["RateLimit-Policy"] == from_redis["RateLimit-Policy"] == '"global";q=3;w=60'
        redis_state = items(from_redis["RateLimit"])['"global"']
        memory_state = items(from_memory["RateLimit"])['"global"']
        assert param(memory_state, "r") == param(redis_state, "r") == "0"
        # Counted down from Redis's reset (whole seconds, rounded up: one apart at most, plus time elapsed).
        assert 0 <= int(param(redis_state, "t")) - int(param(memory_state, "t")) <= 1 + late
        assert abs(int(from_memory["X-RateLimit-Reset"]) - int(from_redis["X-RateLimit-Reset"])) <= 1
        assert from_memory["X-RateLimit-Remaining"] == "0"
        assert 0 <= int(from_redis["Retry-After"]) - int(from_memory["Retry-After"]) <= 1 + late
        assert json.loads(from_memory.content)["limit"]["remaining"] == 0


class TestProblemTypes:
    def test_own_types_sit_under_the_default_base(self, client, plan):
        """An unknown API key: type /problems/invalid-api-key, a path on the API's own origin."""
        response = get(client, "/api/demo/ping", "qk_" + "x" * 40)
        assert response.status_code == 401
        assert json.loads(response.content)["type"] == "/problems/invalid-api-key"

    def test_the_base_is_read_at_call_time(self, client, plan, settings):
        settings.QUOTAS = {**settings.QUOTAS, "PROBLEM_TYPE_BASE": "https://docs.example.com/problems#"}
        response = get(client, "/api/demo/ping", "qk_" + "x" * 40)
        assert json.loads(response.content)["type"] == "https://docs.example.com/problems#invalid-api-key"
        usage = client.get("/api/v1/usage/")
        assert usage.status_code == 401
        assert json.loads(usage.content)["type"] == "https://docs.example.com/problems#not-authenticated"

    def test_registered_types_do_not_move(self, client, plan, settings):
        """quota-exceeded is the IANA's, whatever the base."""
        settings.QUOTAS = {**settings.QUOTAS, "PROBLEM_TYPE_BASE": "https://docs.example.com/problems/"}
        EndpointLimitFactory(plan=plan, name="global", rates="1/min")
        key = issue_key(plan=plan)
        get(client, "/api/demo/ping", key)
        body = json.loads(get(client, "/api/demo/ping", key).content)
        assert body["type"] == "https://iana.org/assignments/http-problem-types#quota-exceeded"

    def test_every_own_type_is_documented(self):
        """Every slug of OWN_TYPES is named in docs/responses.md's "Problem types"."""
        text = RESPONSES_PAGE.read_text(encoding="utf-8")
        section = text[text.index("## Problem types") :]
        assert [t for t in problems.OWN_TYPES if f"`{t}`" not in section] == []

    def test_every_type_the_code_sends_is_listed(self):
        """OWN_TYPES (what the documentation test reads) names every slug passed to problem_type()."""
        root = ROOT
        apps = ("quotas", "usage", "plans", "adaptive", "dashboard")
        sources = [p for app in apps for p in (root / app).rglob("*.py")]
        used = {m for p in sources for m in re.findall(r'problem_type\("([a-z-]+)"\)', p.read_text(encoding="utf-8"))}
        assert used
        assert used - set(problems.OWN_TYPES) == set()

    @pytest.mark.parametrize(
        ("base", "check_id"),
        [
            ("https://docs.example.com/problems/", None),
            ("/problems/", None),
            ("tag:example.com,2025:problem:", None),
            ("problems/", "quotas.E045"),  # resolves differently under every request path
            ("//docs.example.com/p/", "quotas.E045"),
            ("https://docs.example.com/problems", "quotas.E045"),  # ...problemsforbidden
            ("https://docs example.com/", "quotas.E045"),
            ("", "quotas.E045"),
            (None, "quotas.E045"),
            ("urn:quotas:problem:", "quotas.W045"),
        ],
    )
    def test_the_base_is_checked(self, settings, base, check_id):
        settings.QUOTAS = {**settings.QUOTAS, "PROBLEM_TYPE_BASE": base}
        assert [m.id for m in check_settings()] == ([check_id] if check_id else [])

    def test_a_bad_base_stops_manage_py_check(self, settings):
        from django.core.management.base import SystemCheckError

        settings.QUOTAS = {**settings.QUOTAS, "PROBLEM_TYPE_BASE": "problems"}
        with pytest.raises(SystemCheckError, match=r"quotas\.E045"):
            call_command("check")
