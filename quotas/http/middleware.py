"""Adds what the throttle decided to the response, and settles the decision after the view.

DRF throttles cannot touch the response, so :class:`QuotaThrottle` leaves
its verdicts on the request (:mod:`quotas.http.context`). After the view, this
middleware settles each one (:mod:`quotas.http.settlement`: a refund on a
server error when a limit asks for it, the actual cost a view reported,
concurrency leases; a streamed body when it ends) and adds the rate-limit
headers (a refusal's body is the exception handler's business,
:mod:`quotas.drf.handlers`). Sync and async: under ASGI a request does not go
through a thread unless it has a decision to settle.

Sign-ins (a 429 for one refused for too many failures, the trusted-device
cookie) are :class:`~quotas.http.sign_in.SignInThrottleMiddleware`'s job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from http import HTTPStatus

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse

from quotas import problems
from quotas.decide import Verdict, settle
from quotas.exceptions import ProblemException
from quotas.http import responses
from quotas.http.context import HANDLING, STATE_KEY, take_verdicts, verdicts_of
from quotas.http.cost import COST_ATTRIBUTE
from quotas.http.headers import add_rate_limit_headers
from quotas.http.hybrid import HybridMiddleware
from quotas.http.settlement import SERVER_ERROR, needs_settling, settle_at_end, settle_verdicts


class QuotaHeadersMiddleware(HybridMiddleware):
    """Adds rate-limit headers and settles decisions (see module docstring)."""

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self.__acall__(request)
        handling = HANDLING.set(request)  # for the throttle: see quotas.drf.throttling.QuotaThrottle.allow_request
        try:
            response = self.get_response(request)
        except BaseException:
            settle_failed(request)
            raise
        finally:
            HANDLING.reset(handling)
        state = request.META.get(STATE_KEY)  # state_in(), read here without a call
        return after_view(request, response, state.verdicts) if state is not None and state.verdicts else response

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        handling = HANDLING.set(request)
        try:
            response = await self.get_response(request)
        except BaseException:
            # Above all the CancelledError of a client that went away (Django cancels the request): its
            # lease ends and its estimate is released now, not when the lease expires.
            await sync_to_async(settle_failed)(request)
            raise
        finally:
            HANDLING.reset(handling)
        verdicts = verdicts_of(request)
        if not response.streaming and any(needs_settling(v, response) for v in verdicts):
            # Settling may call Redis (a refund, the actual cost, a lease): off the event loop.
            return await sync_to_async(after_view)(request, response, verdicts)
        # Nothing to settle now, or a streamed body, settled when it ends (quotas.http.settlement).
        return after_view(request, response, verdicts, settled=not response.streaming)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A quota refusal raised outside DRF (a plain view reading the rules while the database is
        down, say) is answered with its problem+json body and Retry-After, not a 500."""
        if not isinstance(exception, ProblemException):
            return None
        return responses.refusal_response(exception.problem, exception.status_code, exception.wait)


def after_view(
    request: HttpRequest, response: HttpResponse, verdicts: Sequence[Verdict], settled: bool = False
) -> HttpResponse:
    """What the platform does to a response on its way out: settle ``verdicts`` (unless ``settled``; a streamed
    body's when it ends) and add the rate-limit headers of the verdict that refused the request (its headers
    must agree with its Retry-After and body), else of the first (the one that priced it). Verdicts without a
    decision have no part in either.

    A view that reported an actual cost out of bounds gets a 500 ``invalid-reported-cost`` problem in place
    of its response (a streamed one has sent its status already: that error is only logged). ``request`` is
    the Django request (where a view may have reported its actual cost).
    """
    if len(verdicts) == 1 and verdicts[0].decision is not None:
        decided = verdicts  # one verdict, decided: the common case
    else:
        decided = [verdict for verdict in verdicts if verdict.decision is not None]
        if not decided:
            return response
    if not settled and (response.streaming or _has_to_settle(request, response, decided)):
        response = _settled(response, decided)
    headline = decided[0]
    for verdict in decided:
        if verdict.refusal is not None:
            headline = verdict  # the last that refused
    decision = headline.decision
    if decision is not None:
        add_rate_limit_headers(decision, response.headers)
    return response


def _settled(response: HttpResponse, decided: Sequence[Verdict]) -> HttpResponse:
    """Settle ``decided`` after ``response`` (a streamed body's when it ends); the response to send."""
    if response.streaming:
        # A list of its own: ``decided`` may be the request's, and the body may end after the request is gone.
        settle_at_end(response, list(decided))  # type: ignore[arg-type]  # streaming: a StreamingHttpResponse
        return response
    error = settle_verdicts(decided, response.status_code)
    if error is not None:
        return responses.render(problems.invalid_reported_cost(error))
    return response


def _has_to_settle(request: HttpRequest, response: HttpResponse, decided: Sequence[Verdict]) -> bool:
    """Whether settling ``decided`` after ``response`` has something to do (most requests have nothing), seen
    without asking each verdict (:func:`needs_settling`): a server error, an actual cost the view reported (on
    the request the first verdict priced, on the Django request, or to set_cost()), or a verdict's leases or
    alerts (Verdict.to_settle)."""
    if response.status_code >= SERVER_ERROR:
        return True
    state = request.META.get(STATE_KEY)
    if state is not None and state.cost is not None:
        return True
    if COST_ATTRIBUTE in getattr(decided[0].request, "__dict__", ()) or COST_ATTRIBUTE in request.__dict__:
        return True
    if len(decided) > 1 and decided[-1].refusal is not None:
        return True  # a later verdict refused what the earlier admitted: they are withdrawn (settle_verdicts)
    # A loop, not any() over a generator: the generator's frame costs more than the loop's work.
    for verdict in decided:  # noqa: SIM110
        if verdict.to_settle:
            return True
    return False


def settle_failed(request: HttpRequest) -> None:
    """Settle the request's verdicts as a failed request's (the view raised, or the request was cancelled)."""
    for verdict in take_verdicts(request):  # taken off: nothing later settles them again
        settle(verdict, HTTPStatus.INTERNAL_SERVER_ERROR)
