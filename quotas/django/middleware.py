"""Limits every view under the path prefixes of ``QUOTAS['PATH_LIMITS']``, DRF's or not.

``QUOTAS['PATH_LIMITS']`` is a list of ``{"prefix": "/hooks/", "scope":
"webhook", "rate": "100/min"}`` (``rate`` and ``algorithm`` optional, see
:mod:`quotas.django.respond`; a rate counts like the same string in DRF's
settings). The longest matching prefix wins; a request under no prefix passes
untouched. Each prefix has its own counters. Put this middleware after
Django's AuthenticationMiddleware (the client is the signed-in user, else the
API key or the address). It adds the headers and settles its own decisions,
so QuotaHeadersMiddleware is not needed for these paths. Meant for views that
QuotaThrottle does not limit: a DRF view under a prefix would be decided twice.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from django.http import HttpRequest, HttpResponse

from quotas.decide import Facts
from quotas.django.respond import agate, facts_for, gate
from quotas.engine import Engine, default_engine
from quotas.http.hybrid import HybridMiddleware
from quotas.settings import quota_settings


def path_limit(path: str) -> dict[str, Any] | None:
    """The entry of ``QUOTAS['PATH_LIMITS']`` whose prefix is the longest that ``path`` starts with, or None."""
    matches = [entry for entry in quota_settings.PATH_LIMITS if path.startswith(entry["prefix"])]
    return max(matches, key=lambda entry: len(entry["prefix"])) if matches else None


def _facts(request: HttpRequest, entry: dict[str, Any]) -> Facts:
    return facts_for(
        request, entry.get("scope", ""), entry.get("rate"), algorithm=entry.get("algorithm"), group=entry["prefix"]
    )


class PathQuotaMiddleware(HybridMiddleware):
    """Checks requests under ``QUOTAS['PATH_LIMITS']`` prefixes (see module docstring); sync and async."""

    #: What decides (a subclass may name another :class:`~quotas.engine.Engine`).
    engine: Engine = default_engine

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self.__acall__(request)
        entry = path_limit(request.path)
        if entry is None:
            return self.get_response(request)
        return gate(request, _facts(request, entry), lambda: self.get_response(request), engine=self.engine)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        entry = path_limit(request.path)
        if entry is None:
            return await self.get_response(request)
        return await agate(request, _facts(request, entry), lambda: self.get_response(request), engine=self.engine)
