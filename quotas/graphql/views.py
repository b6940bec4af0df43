"""The front door every GraphQL library's Django view is given: a ``dispatch`` that asks the gate first.

:class:`QuotaGraphQLMixin` (or :class:`QuotaAsyncGraphQLMixin` for an ``async def dispatch``) goes before the
library's view class
(:mod:`quotas.graphql.graphene`, :mod:`quotas.graphql.strawberry` do it); it
only translates between Django's class-based view and
:func:`quotas.graphql.gate.limit_graphql`.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from quotas.graphql.gate import alimit_graphql, limit_graphql


class QuotaGraphQLOptions:
    """The options of a limited GraphQL view: ``quota_scope`` selects the plan's limits (as a DRF view's does;
    "" for the plan-wide and path limits); ``max_complexity`` overrides ``QUOTAS['GRAPHQL_MAX_COMPLEXITY']`` for
    this endpoint. Both can be class attributes or ``as_view()`` arguments.
    """

    quota_scope: str = ""
    max_complexity: int | None = None

    def __init__(self, *args: Any, quota_scope: str | None = None, max_complexity: int | None = None, **kwargs: Any):
        # Taken here: graphene-django's view names the keyword arguments it accepts, and refuses others.
        super().__init__(*args, **kwargs)
        if quota_scope is not None:
            self.quota_scope = quota_scope
        if max_complexity is not None:
            self.max_complexity = max_complexity


class QuotaGraphQLMixin(QuotaGraphQLOptions):
    """Limits a GraphQL view by its queries' complexity (see :mod:`quotas.graphql.gate`)."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """The library's answer to ``request``, or the quota refusal that replaces it."""
        parent = super()
        return limit_graphql(
            request,
            lambda: parent.dispatch(request, *args, **kwargs),  # type: ignore[attr-defined]  # the library view's
            scope=self.quota_scope,
            max_complexity=self.max_complexity,
        )


class QuotaAsyncGraphQLMixin(QuotaGraphQLOptions):
    """:class:`QuotaGraphQLMixin` for a view whose ``dispatch`` is ``async def`` (strawberry's AsyncGraphQLView)."""

    async def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """The library's answer to ``request``, awaited, or the quota refusal that replaces it."""
        parent = super()
        return await alimit_graphql(
            request,
            lambda: parent.dispatch(request, *args, **kwargs),  # type: ignore[attr-defined]  # the library view's
            scope=self.quota_scope,
            max_complexity=self.max_complexity,
        )
