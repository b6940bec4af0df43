"""Settling a request's verdicts after its view: at once, or when a streamed body ends.

:func:`quotas.decide.settle` ends one verdict (a refund on a server error
where a limit asks for it, the actual cost the view reported, its concurrency
leases). Here, the request's side of it:

- every verdict the request holds is settled (a view may list throttle classes
  that decide on their own), the actual cost charged to the first, the one
  that priced the request (:class:`quotas.drf.throttling.QuotaThrottle`);
- an actual cost out of bounds is the view's bug, found after it ran: it is
  logged, the request is settled as a failed one (its estimate released, its
  leases ended) and the caller answers a 500 ``invalid-reported-cost``
  problem in place of the view's response;
- a streamed response (``StreamingHttpResponse``, how LLM-style APIs answer)
  is settled when its body ends, so the cost its generator reports at the end
  counts and its lease lasts until the last byte; when the body fails midway,
  as a failed request; and when the response is closed first (the client went
  away: the server closes it), then. Whichever comes first settles, once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from http import HTTPStatus
from typing import Any

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

from quotas.decide import Verdict, settle, withdraw
from quotas.http.cost import actual_cost

logger = logging.getLogger(__name__)

#: 500 as a plain int, read on every response: on Python 3.11 reading ``HTTPStatus.INTERNAL_SERVER_ERROR`` goes
#: through the enum's descriptor each time.
SERVER_ERROR = int(HTTPStatus.INTERNAL_SERVER_ERROR)


def settle_verdicts(verdicts: Sequence[Verdict], status: int) -> str | None:
    """Settle every verdict of one request whose response had ``status``.

    Returns None, or, when the view reported an actual cost out of bounds, the
    error naming it (logged; the request is then settled as a server error).
    """
    if not verdicts:
        return None
    error = None
    try:
        actual = actual_cost(verdicts[0].request)
    except (TypeError, ValueError) as exc:
        error, actual = str(exc), None
        logger.error("quotas: %s The request is settled as a failed one (answered 500).", error)
        status = SERVER_ERROR
    failed = status >= SERVER_ERROR
    cost = actual  # the first verdict priced the request; the others spent their rate windows only, at no cost
    if refused_later(verdicts):
        # A later throttle class refused what the earlier ones admitted: the request is charged nothing.
        for verdict in verdicts[:-1]:
            withdraw(verdict)
        return error
    for verdict in verdicts:
        # Unless settle() would return at once: nothing to refund or charge, no lease to end, no alert waiting.
        if verdict.decision is not None and (failed or cost is not None or verdict.to_settle):
            settle(verdict, status, cost)
        cost = None
    return error


def refused_later(verdicts: Sequence[Verdict]) -> bool:
    """Whether the last of a request's several verdicts refused it (the earlier ones admitted it)."""
    return len(verdicts) > 1 and verdicts[-1].refusal is not None


def needs_settling(verdict: Verdict, response: Any) -> bool:
    """Whether settling ``verdict`` after ``response`` has anything to do (it may then call Redis)."""
    decision = verdict.decision
    if decision is None or not decision.allowed:
        return False
    if response.status_code >= SERVER_ERROR or verdict.to_settle:  # leases to end, budget alerts to send
        return True
    try:
        return actual_cost(verdict.request) is not None
    except (TypeError, ValueError):
        return True  # a cost out of bounds: settled as a failed request


def settle_at_end(response: StreamingHttpResponse, verdicts: Sequence[Verdict]) -> None:
    """Settle ``verdicts`` when ``response``'s body ends, fails, or is closed, whichever comes first."""
    once = _SettleOnce(verdicts, response.status_code)
    if getattr(response, "file_to_stream", None) is None:
        # Settled when the body ends or fails, or when the response is closed first (the client gone): Django
        # calls the close() of a body it is given when the response is closed (the server closes it once done;
        # Django's ASGI handler too, after a cancelled send; the test client once the body is read), after the
        # view's own body's (whose ``finally`` may report the cost) and before it ends the request.
        body = response.streaming_content
        response.streaming_content = _AsyncBody(body, once) if response.is_async else _Body(body, once)  # type: ignore[arg-type]
    else:
        # A FileResponse, which a WSGI server may send through its wsgi.file_wrapper (replacing its body would cost
        # it that): settled when closed, before Django's own close() ends the request.
        response.close = _ClosingSettles(response.close, once)  # type: ignore[method-assign]


class _ClosingSettles:
    """A response's ``close()`` that settles first (:class:`_SettleOnce` logs its own errors), then closes."""

    def __init__(self, close: Callable[[], None], once: _SettleOnce) -> None:
        self.close = close
        self.once = once

    def __call__(self) -> None:
        try:
            self.once()
        finally:
            self.close()


class _SettleOnce:
    """Settles a streamed request's verdicts the first time it is called, from any thread."""

    def __init__(self, verdicts: Sequence[Verdict], status: int) -> None:
        self.verdicts = verdicts
        self.status = status
        self.lock = threading.Lock()
        self.pending = True

    def __call__(self, failed: bool = False) -> None:
        with self.lock:
            if not self.pending:
                return
            self.pending = False
        try:
            settle_verdicts(self.verdicts, SERVER_ERROR if failed else self.status)
        except Exception:
            # The body is sent (or the client gone): nothing left to answer. response.close() would drop the
            # error without a word, so it is logged here; the store's own errors are logged and counted below.
            logger.exception("quotas: settling a streamed response failed")


class _Body:
    """A streamed body: ``chunks``, settling once the last one is out, as a failed request if they raise, or when
    closed first."""

    def __init__(self, chunks: Iterator[bytes], once: _SettleOnce) -> None:
        self.chunks = iter(chunks)
        self.once = once

    def __iter__(self) -> _Body:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self.chunks)
        except StopIteration:
            self.once()
            raise
        except Exception:
            self.once(failed=True)
            raise

    def close(self) -> None:
        self.once()


class _AsyncBody:
    """:class:`_Body` for an async body; settling may call Redis, so it runs in asgiref's worker thread (but in
    close(), which Django's ASGI handler calls from a thread already)."""

    def __init__(self, chunks: AsyncIterator[bytes], once: _SettleOnce) -> None:
        self.chunks = aiter(chunks)
        self.once = once

    def __aiter__(self) -> _AsyncBody:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await anext(self.chunks)
        except StopAsyncIteration:
            await sync_to_async(self.once)()
            raise
        except Exception:
            await sync_to_async(self.once)(failed=True)
            raise

    def close(self) -> None:
        self.once()
