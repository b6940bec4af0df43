"""The hot path's shortcuts give exactly what the plain code they replace gave.

Headers are built in one pass with text precomputed per window, problem
bodies copy headers without checking them again, and metrics skip label
checks for values already admitted. Each test compares against the straightforward version, written
out here (and refusals, computed plainly now, still follow the states).
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import replace

import pytest
from django.http import HttpResponse
from prometheus_client import REGISTRY
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from quotas import metrics, problems
from quotas.decide import Verdict
from quotas.engine import default_engine
from quotas.formats.rates import Rate
from quotas.http import middleware, responses
from quotas.http.cost import actual_cost, set_cost
from quotas.http.headers import rate_limit_headers
from quotas.http.middleware import after_view
from quotas.http.settlement import needs_settling
from quotas.identity.clients import subscription_client, user_client
from quotas.rules.limits import LimitRule, Window, sf_string
from quotas.rules.snapshot import Subscriber
from quotas.store.decision import Decision, WindowState

ALGORITHMS = (
    "token_bucket", "fixed_window", "sliding_window_log", "leaky_bucket", "budget",
    "concurrency", "period_quota", "period_requests",
)  # fmt: skip


# Admitted at collection, before any test runs: a process admits only its first MAX_PLANS plans as labels of
# their own (tests before this one may have used them all), and a value once admitted stays so.
metrics.plan_label("hotpath-plan")


def reference_headers(decision: Decision, legacy: bool) -> dict[str, str]:
    """rate_limit_headers written out plainly from the documented rules (docs/responses.md)."""
    states = [s for s in decision.states if not s.window.shadow and not s.window.is_budget]
    refusing = [s for s in decision.states if not s.ok and not s.window.shadow]
    if not decision.allowed and refusing and all(s.window.is_budget for s in refusing):
        return {}  # refused by a budget alone: no header describes a window that admitted it
    if not states:
        return {}
    policy = [reference_policy_item(decision, s.window) for s in states]
    current = [reference_state_item(decision, s) for s in states if s.remaining is not None]
    headers = {"RateLimit-Policy": ", ".join(policy)}
    if current:
        headers["RateLimit"] = ", ".join(current)
    if legacy:
        headers.update(reference_legacy_headers(decision))
    return headers


def reference_weighted(decision: Decision, w: Window) -> bool:
    """Whether ``w`` counts weight units for this decision (its items then say so)."""
    units = w.weight if decision.weight is None else decision.weight
    return w.algorithm not in ("concurrency", "period_requests") and (w.algorithm == "period_quota" or units != 1)


def reference_policy_item(decision: Decision, w: Window) -> str:
    """One window's item of RateLimit-Policy."""
    item = f"{sf_string(w.policy)};q={w.quota}"  # the full quota, whatever the multiplier
    if w.algorithm == "concurrency":
        return item + ';qu="concurrent-requests"'
    item += ';qu="requests"' if reference_weighted(decision, w) else ""
    return item + (f';quotas-period="{w.period}"' if w.period else f";w={w.window}")


def reference_state_item(decision: Decision, s: WindowState) -> str:
    """One window's item of RateLimit (for a state read from Redis)."""
    w = s.window
    state = f"{sf_string(w.policy)};r={max(0, s.remaining or 0)}"
    if w.algorithm != "concurrency":
        state += f";t={math.ceil(s.reset_us / 1e6)}"
    elif not s.ok and s.retry_us is not None:
        state += f";t={math.ceil(s.retry_us / 1e6)}"
    if reference_weighted(decision, w):
        state += f";quotas-weight={w.weight if decision.weight is None else decision.weight}"
    return state


def reference_legacy_headers(decision: Decision) -> dict[str, str]:
    """X-RateLimit-* of the most restrictive window, if any."""
    top = decision.most_restrictive()
    if top is None:
        return {}
    return {
        "X-RateLimit-Limit": str(top.quota),
        "X-RateLimit-Remaining": str(max(0, top.remaining or 0)),
        "X-RateLimit-Reset": str(math.ceil(decision.now + top.reset_us / 1e6)),
    }


def random_decision(rng: random.Random) -> Decision:
    states = []
    for i in range(rng.randint(0, 6)):
        rule = LimitRule(
            id=f"l{i}",
            name=rng.choice(["search", 'we"ird\\name', "naïve", f"limit-{i}"]),
            rates=(Rate(rng.choice([1, 5, 10, 100]), rng.choice([1, 60, 3600])),),
            algorithm=rng.choice(ALGORITHMS),
            weight=rng.choice([1, 1, 2]),
            shadow=rng.random() < 0.2,
            period="day" if rng.random() < 0.1 else "",
        )
        window = rule.windows[0]
        ok = rng.random() < 0.6
        retry = 0 if ok else rng.choice([None, rng.randint(1, 10**8)])
        quota = window.quota if rng.random() < 0.7 else max(1, window.quota // 2)
        # Small ranges make ties likely: the first state must win them, as min() and max() do.
        states.append(
            WindowState(
                window,
                ok,
                rng.choice([None, -3, 0, 1, 2, 5]),
                rng.choice([0, 1, 999_999, 1_000_000, 1_000_001, 59_000_000]),
                retry,
                quota=quota,
            )
        )
    allowed = all(s.ok or s.window.shadow for s in states)
    return Decision(allowed, states, 1_700_000_000 + rng.random(), rng.choice([None, None, 0, 1, 3]))


@pytest.mark.parametrize("legacy", [True, False])
def test_headers_match_the_plain_implementation_on_random_decisions(settings, legacy):
    """For any mix of windows, units, quotas, denials and ties, the headers are the rules written out plainly."""
    settings.QUOTAS = {**settings.QUOTAS, "LEGACY_HEADERS": legacy}
    rng = random.Random(1234)
    for _ in range(3000):
        decision = random_decision(rng)
        assert rate_limit_headers(decision) == reference_headers(decision, legacy)


@pytest.mark.parametrize("legacy", [True, False])
def test_headers_from_texts_kept_for_the_windows_match_the_plain_implementation(settings, legacy):
    """Decisions sharing a memo (the store's for one route's windows and weight, an allowance's) get their headers
    from texts kept there once: the same as the rules written out plainly, whatever their numbers."""
    settings.QUOTAS = {**settings.QUOTAS, "LEGACY_HEADERS": legacy}
    rng = random.Random(4321)
    for _ in range(1500):
        decision = random_decision(rng)
        memo: dict = {}
        for _ in range(3):
            states = [
                WindowState(
                    s.window, s.ok, rng.choice([None, -3, 0, 1, 7]) if s.remaining is None else s.remaining - 1,
                    max(0, s.reset_us - rng.choice([0, 1, 999_999])), s.retry_us, quota=s.quota,
                )
                for s in decision.states
            ]  # fmt: skip
            decision = replace(decision, states=states, memo=memo)
            assert rate_limit_headers(decision) == reference_headers(decision, legacy)


def test_refusals_are_recomputed_when_states_change():
    """denying_states() and would_deny() return fresh lists and follow a replaced or extended states list."""
    rule = LimitRule(id="a", name="a", rates=(Rate(1, 60),))
    shadow = LimitRule(id="b", name="b", rates=(Rate(1, 60),), shadow=True)
    deny = WindowState(rule.windows[0], False, 0, 10, 10)
    would = WindowState(shadow.windows[0], False, 0, 10, 10)
    decision = Decision(False, [WindowState(rule.windows[0], True, 1, 0, 0)], 0.0)
    assert decision.denying_states() == []
    decision.states.append(deny)
    assert decision.denying_states() == [deny]
    first = decision.denying_states()
    first.clear()  # a caller's list is its own
    assert decision.denying_states() == [deny]
    decision.states = [would]
    assert decision.denying_states() == []
    assert decision.would_deny() == [would]


def test_a_problem_keeps_the_headers_setting_them_one_by_one_would():
    """render() copies the refused response's headers (but its type and length) like __setitem__ did."""
    like = HttpResponse(b"{}", status=429, content_type="text/html; charset=utf-8")
    like.headers["Retry-After"] = "7"
    like.headers["Vary"] = "Accept"
    like.headers["RateLimit-Policy"] = '"naïve";q=5;w=60'  # not latin-1 safe: stored MIME-encoded
    like.headers["X-RateLimit-Reset"] = "1795322461"
    expected = HttpResponse("x", status=429, content_type=problems.CONTENT_TYPE)
    for name, value in like.headers.items():
        if name.lower() not in ("content-type", "content-length"):
            expected.headers[name] = value
    response = responses.render({"status": 429, "title": "Quota exceeded"}, like=like)
    assert list(response.headers.items()) == list(expected.headers.items())
    assert response.content == b'{"status":429,"title":"Quota exceeded"}'


def test_the_headers_written_at_once_are_those_setting_them_one_by_one_would():
    """after_view() writes the rate-limit headers into ResponseHeaders' dict at once: the same names, values
    and order as __setitem__ one by one, a header already there replaced in its place."""
    rng = random.Random(99)
    for _ in range(500):
        decision = random_decision(rng)
        expected = HttpResponse("x")
        expected.headers["ratelimit"] = "the view's own"
        for name, value in rate_limit_headers(decision).items():
            expected.headers[name] = value
        response = HttpResponse("x")
        response.headers["ratelimit"] = "the view's own"
        after_view(None, response, [Verdict(decision=decision)], settled=True)  # type: ignore[arg-type]
        assert list(response.headers.items()) == list(expected.headers.items())
        assert response.headers._store == expected.headers._store


@pytest.mark.usefixtures("bounded_labels")
def test_an_overflowing_label_still_counts_every_use():
    """Values counted as 'other' never take the shortcut: each use adds to the overflow counter."""
    for i in range(metrics.MAX_SCOPES + 1):
        metrics.observe_decision("hotpath", f"hotpath-scope-{i}", "allowed", "none", 0.0001)
    extra = "hotpath-scope-beyond"
    before = REGISTRY.get_sample_value("quota_metrics_label_overflow_total", {"label": "scope"}) or 0.0
    for _ in range(3):
        metrics.observe_decision("hotpath", extra, "allowed", "none", 0.0001)
    after = REGISTRY.get_sample_value("quota_metrics_label_overflow_total", {"label": "scope"})
    assert after == before + 3


def test_an_admitted_label_is_counted_the_same_on_the_shortcut():
    """The second decision of a (plan, scope) counts under the same series as the first."""
    labels = {"plan": "hotpath-plan", "scope": "none", "outcome": "allowed", "reason": "none"}
    before = REGISTRY.get_sample_value("quota_decisions_total", labels) or 0.0
    metrics.observe_decision("hotpath-plan", "", "allowed", "none", 0.0001)
    metrics.observe_decision("hotpath-plan", None, "allowed", "none", 0.0001)
    metrics.observe_decision("hotpath-plan", "", "allowed", "none", 0.0001)
    assert REGISTRY.get_sample_value("quota_decisions_total", labels) == before + 3


def test_actual_cost_reads_both_requests():
    """A cost set on DRF's request, on the Django request, or through set_cost is found; none gives None."""
    factory = APIRequestFactory()
    django_request = factory.get("/")
    request = Request(django_request)
    assert actual_cost(request) is None
    django_request.quota_cost = "0.5"  # as code given the Django request sets it
    assert actual_cost(request) == 500_000
    request = Request(factory.get("/"))
    request.quota_cost = "0.25"
    assert actual_cost(request) == 250_000
    request = Request(factory.get("/"))
    set_cost(request, "2")
    assert actual_cost(request) == 2_000_000
    assert actual_cost(factory.get("/")) is None


def test_clients_follow_a_reloaded_subscriber():
    """A user's client is named by its id; a subscriber's client carries the Subscriber it was made from."""
    assert user_client("42") == user_client("42")
    assert user_client("42").tag == "{u.42}"
    old = Subscriber(id=7, plan_id=1)
    assert subscription_client(old).subscriber is old
    new = Subscriber(id=7, plan_id=2)
    client = subscription_client(new)
    assert client.subscriber is new
    assert (client.kind, client.ident, client.tag) == ("subscription", "7", "{s.7}")


@pytest.mark.parametrize("reported_on", ["nowhere", "drf", "django", "no request"])
@pytest.mark.parametrize("status", [200, 429, 500])
@pytest.mark.parametrize("to_settle", [False, True])
def test_the_middleware_settles_whenever_settling_has_something_to_do(monkeypatch, reported_on, status, to_settle):
    """after_view looks for something to settle without a call (a server error, an actual cost reported on
    DRF's request or Django's, a verdict's leases or alerts): it settles exactly when needs_settling() says
    that settling this verdict after this response has something to do (a verdict left without its request
    included)."""
    settled: list[int] = []
    monkeypatch.setattr(middleware, "settle_verdicts", lambda verdicts, status: settled.append(status))
    django_request = APIRequestFactory().get("/")
    request = Request(django_request)
    if reported_on == "drf":
        request.quota_cost = "0.5"
    elif reported_on == "django":
        django_request.quota_cost = "0.5"
    decision = Decision(allowed=True, states=[], now=0.0)
    priced = None if reported_on == "no request" else request
    verdict = Verdict(user_client("42"), 1, decision, request=priced, to_settle=to_settle)
    response = HttpResponse(status=status)
    after_view(django_request, response, [verdict])
    assert bool(settled) == needs_settling(verdict, response)


def test_the_runtime_read_without_a_call_follows_the_process():
    """``Engine.ready`` is the runtime ``engine.runtime()`` gave this process; None after ``engine.reset()`` and in
    a forked child until the child asks ``engine.runtime()``, which builds the child's own (tests/quotas/test_fork.py:
    the parent's holds the parent's allowances) and starts its poller."""
    runtime = default_engine.runtime()
    assert default_engine.ready is runtime
    pid = os.fork()
    if pid == 0:  # the child: reports through its exit code, and leaves without the parent's atexit handlers
        fresh = default_engine.ready is None
        own = default_engine.runtime()
        seen_to = own is default_engine.ready and own is not runtime and own.poller.pid == os.getpid()
        os._exit(0 if fresh and seen_to else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    default_engine.reset()
    assert default_engine.ready is None
