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
from quotas.http.context import VERDICTS, take_verdicts, verdicts_of
from quotas.http.cost import COST_ATTRIBUTE
from quotas.http.headers import header_entries
from quotas.http.hybrid import HybridMiddleware
from quotas.http.settlement import SERVER_ERROR, needs_settling, settle_at_end, settle_verdicts


class QuotaHeadersMiddleware(HybridMiddleware):
    """Adds rate-limit headers and settles decisions (see module docstring)."""

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self.__acall__(request)
        try:
            response = self.get_response(request)
        except BaseException:
            settle_failed(request)
            raise
        verdicts = getattr(request, VERDICTS, None)  # verdicts_of(), read here: once per request, without a call
        return after_view(request, response, verdicts) if verdicts else response

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        try:
            response = await self.get_response(request)
        except BaseException:
            # Above all the CancelledError of a client that went away (Django cancels the request): its
            # lease ends and its estimate is released now, not when the lease expires.
            await sync_to_async(settle_failed)(request)
            raise
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
    not read since sign-ins left for :mod:`quotas.http.sign_in`; it stays so the front doors calling this (the
    middleware, :mod:`quotas.django.respond`) keep one signature.
    """
    if len(verdicts) == 1 and verdicts[0].decision is not None:
        decided = verdicts  # one verdict, decided: the common case
    else:
        decided = [verdict for verdict in verdicts if verdict.decision is not None]
        if not decided:
            return response
    if not settled:
        if response.streaming:
            # A list of its own: ``decided`` may be the request's, and the body may end after the request is gone.
            settle_at_end(response, list(decided))  # type: ignore[arg-type]  # streaming: a StreamingHttpResponse
        else:
            # Settled only when there is something to settle (most requests have nothing), seen here without a
            # call: a server error, an actual cost the view reported (on the request the first verdict priced,
            # or the Django request it wraps), or a verdict's leases or alerts (Verdict.to_settle). Against
            # asking settle_verdicts(): about 2,000 instructions less a request (cachegrind).
            status = response.status_code
            own = getattr(decided[0].request, "__dict__", {})  # read as actual_cost() reads it
            inner = getattr(own.get("_request"), "__dict__", {})
            to_settle = status >= SERVER_ERROR or COST_ATTRIBUTE in own or COST_ATTRIBUTE in inner
            for verdict in decided:
                to_settle = to_settle or verdict.to_settle
            error = settle_verdicts(decided, status) if to_settle else None
            if error is not None:
                response = responses.render(problems.invalid_reported_cost(error))
    headline = decided[0]
    for verdict in decided:
        if verdict.refusal is not None:
            headline = verdict  # the last that refused
    decision = headline.decision
    if decision is not None:
        # Written straight into ResponseHeaders' own dict, as its __setitem__ would (lower-case name -> (name,
        # value)), skipping the check of every name and value for a charset and newlines: ours are ASCII, the
        # policy names printable by sf_string(). About 27,000 instructions fewer a response (five headers) than
        # ``response.headers[name] = value`` for each (cachegrind; ResponseHeaders has no update()).
        response.headers._store.update(header_entries(decision))
    return response


def settle_failed(request: HttpRequest) -> None:
    """Settle the request's verdicts as a failed request's (the view raised, or the request was cancelled)."""
    for verdict in take_verdicts(request):  # taken off: nothing later settles them again
        settle(verdict, HTTPStatus.INTERNAL_SERVER_ERROR)
