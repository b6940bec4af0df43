"""Starts the load reporter in every process that serves requests (see :mod:`adaptive.reporter`)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from .reporter import ensure_reporter


class LoadReporterMiddleware:
    """Makes sure this process publishes its load; costs one pid comparison per request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        ensure_reporter()
        return self.get_response(request)
