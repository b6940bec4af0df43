"""What every middleware of the product shares: one class serves WSGI and ASGI alike.

Django's own ``MiddlewareMixin`` would do, but it runs a sync hook in a thread under ASGI on every request;
each of ours has a coroutine of its own (``__acall__``) instead.

Each is built once per process, as the server (gunicorn, uvicorn, ...) loads the application, before the first
request: where a production process on the memory store refuses to start (quotas.E091), whatever server runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import iscoroutinefunction
from typing import Any

from asgiref.sync import markcoroutinefunction
from django.http import HttpRequest

from quotas.store.opening import refuse_memory_store_in_production


class HybridMiddleware:
    """A middleware that is sync or async as the chain it is built into: ``__call__`` hands an async chain's
    request to the subclass's ``__acall__``."""

    sync_capable = True
    async_capable = True
    __call__: Callable[[HttpRequest], Any]  # each subclass's own

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        # A server runs no system checks: raised here, the worker fails to boot (gunicorn stops) with that line,
        # rather than serving with counters of its own.
        refuse_memory_store_in_production()
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
