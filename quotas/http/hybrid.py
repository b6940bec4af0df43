"""What every middleware of the product shares: one class serves WSGI and ASGI alike.

Django's own ``MiddlewareMixin`` would do, but it runs a sync hook in a thread under ASGI on every request;
each of ours has a coroutine of its own (``__acall__``) instead.
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import iscoroutinefunction
from typing import Any

from asgiref.sync import markcoroutinefunction
from django.http import HttpRequest


class HybridMiddleware:
    """A middleware that is sync or async as the chain it is built into: ``__call__`` hands an async chain's
    request to the subclass's ``__acall__``."""

    sync_capable = True
    async_capable = True
    __call__: Callable[[HttpRequest], Any]  # each subclass's own

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
