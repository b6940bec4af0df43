"""Starts the load reporter in every process that serves requests and times its responses (see
:mod:`adaptive.reporter` and :mod:`adaptive.responses`)."""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter

from django.http import HttpRequest, HttpResponse

from .reporter import ensure_reporter
from .responses import RESPONSES


class LoadReporterMiddleware:
    """Makes sure this process publishes its load, and records each response's time and status.

    Costs one pid comparison, one ``perf_counter`` pair and one deque append per request; the p90 and the 5xx
    share are computed in the reporter's thread. The time covers the middleware listed after it and the view.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self._record = RESPONSES.append

    def __call__(self, request: HttpRequest) -> HttpResponse:
        ensure_reporter()
        started = perf_counter()
        response = self.get_response(request)
        self._record((perf_counter() - started, response.status_code))
        return response
