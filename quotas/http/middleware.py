"""Adds what the throttle decided to the response, and settles the decision after the view.

DRF throttles cannot touch the response, so :class:`QuotaThrottle` leaves
its decision on the request (:mod:`quotas.http.context`). After the view, this
middleware adds the rate-limit headers to the response (a refusal's body is
the exception handler's business, :mod:`quotas.drf.handlers`), and settles:
refunds a decision whose view ended in a server error when a limit asks for
it, charges the actual cost a view reported, and ends concurrency leases.

It also answers a sign-in that Django's authentication refused for too many
failures (:mod:`quotas.identity.auth_failures`) with a 429: Django's login views
cannot say so themselves; and it sets the trusted-device cookie of a browser
that just signed in (:mod:`quotas.identity.devices`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from quotas.engine.core import Engine
from quotas.engine.runtime import get_engine
from quotas.exceptions import ProblemException
from quotas.http import problems
from quotas.http.context import Decided, auth_wait_of, decided_of
from quotas.http.cost import actual_cost
from quotas.http.headers import rate_limit_headers
from quotas.identity import devices
from quotas.observability.events import fire_budget_alerts


class QuotaHeadersMiddleware:
    """Adds rate-limit headers and settles decisions (see module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        devices.set_cookie(request, response)  # a browser that just signed in is trusted from now on
        auth_wait = auth_wait_of(request)
        if auth_wait and response.status_code < 500:
            return self.auth_throttled(response, auth_wait)
        decided = decided_of(request)
        if decided is not None:
            decision = decided.decision
            if decision.allowed:
                engine = get_engine()
                self.settle(engine, decided, response)
                if decision.request_id:
                    engine.release(decision)
            for name, value in rate_limit_headers(decision).items():
                response.headers[name] = value
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A quota refusal raised outside DRF (a plain view reading the rules while the database is
        down, say) is answered with its problem+json body and Retry-After, not a 500."""
        if not isinstance(exception, ProblemException):
            return None
        response = problems.render(exception.problem)
        if exception.wait is not None:
            response.headers["Retry-After"] = str(math.ceil(exception.wait))
        return response

    @staticmethod
    def auth_throttled(response: HttpResponse, wait: int) -> HttpResponse:
        """A sign-in refused for too many failures (quotas.identity.auth_failures): 429, a page or a problem."""
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
