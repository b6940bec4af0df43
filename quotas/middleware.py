"""Turns the throttle's decision into what the client sees.

DRF throttles cannot touch the response, so :class:`QuotaThrottle` leaves
its decision on the request and this middleware adds the rate-limit headers
to every response of a throttled view, replaces the body of a refusal with
``application/problem+json``, and refunds a decision whose view ended in a
server error when a limit asks for it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from . import problems
from .alerts import fire_budget_alerts
from .conf import quota_settings
from .context import Decided, auth_wait_of, decided_of, problem_of
from .cost import actual_cost
from .engine import Engine, get_engine
from .headers import rate_limit_headers


class QuotaHeadersMiddleware:
    """Adds rate-limit headers and problem+json bodies (see module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        auth_wait = auth_wait_of(request)
        if auth_wait and response.status_code < 500:
            return self.auth_throttled(response, auth_wait)
        problem = problem_of(request)
        decided = decided_of(request)
        if decided is not None:
            decision = decided.decision
            engine = get_engine()
            if decision.allowed:
                self.settle(engine, decided, response)
                if decision.request_id:
                    engine.release(decision)
            for name, value in rate_limit_headers(decision).items():
                response.headers[name] = value
            if not decision.allowed and response.status_code == 429:
                rules = engine.rules.current()
                plan_id = decided.plan_id
                plan = rules.plans.get(plan_id) if plan_id is not None else None
                denying = decision.denying_states()
                upgrade = rules.upgrade_for(plan_id, decision.denying_state().window) if denying else None
                if decision.banned or decision.ban_started:
                    problem = problems.banned(decision, plan.slug if plan else None)
                elif decision.budget_denied:
                    problem = problems.budget_exceeded(decision, upgrade, plan.slug if plan else None)
                else:
                    problem = problems.rate_limited(decision, upgrade, plan.slug if plan else None)
        if problem is not None and response.status_code == problem["status"]:
            if "retry_after" in problem:
                retry = max(int(problem["retry_after"]), int(response.headers.get("Retry-After", 0) or 0))
                problem["retry_after"] = retry
                response.headers["Retry-After"] = str(retry)
            response = problems.render(problem, like=response)
            if response.status_code == 401:
                # RFC 9110 asks a 401 to say how to authenticate.
                response.headers["WWW-Authenticate"] = f'ApiKey header="{quota_settings.API_KEY_HEADER}"'
        return response

    @staticmethod
    def auth_throttled(response: HttpResponse, wait: int) -> HttpResponse:
        """A sign-in refused for too many failures (quotas/auth_failures.py): 429, HTML for pages, else a problem."""
        if response.get("Content-Type", "").startswith("text/html"):
            refused = HttpResponse(
                "<!doctype html><title>Too many failed sign-ins</title><h1>Too many failed sign-ins</h1>"
                f"<p>Too many attempts with wrong credentials. Try again in {wait} seconds.</p>",
                status=429,
                content_type="text/html; charset=utf-8",
            )
        else:
            refused = problems.render(problems.auth_throttled(wait))
        refused.headers["Retry-After"] = str(wait)
        return refused

    @staticmethod
    def settle(engine: Engine, decided: Decided, response: HttpResponse) -> None:
        """After the view: refund on a server error, else charge the actual cost (once)."""
        decision = decided.decision
        if response.status_code >= 500:
            engine.refund(decision)
            actual = 0  # a failed view releases its estimate
        else:
            cost = actual_cost(decided.request)
            if cost is None:
                return
            actual = cost
        if actual != decision.cost_micros:
            fire_budget_alerts(decided.client, engine.reconcile(decision, actual))
