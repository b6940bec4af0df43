"""The front door every GraphQL library's Django view is given: a ``dispatch`` that asks the gate first.

:class:`QuotaGraphQLMixin` (or :class:`QuotaAsyncGraphQLMixin` for an ``async def dispatch``) goes before the
library's view class (:mod:`quotas.graphql.graphene`, :mod:`quotas.graphql.strawberry` do it); it only
translates between Django's class-based view and :func:`quotas.graphql.gate.limit_graphql`. A library's view
gives the gate two things through it:

- a reader, :meth:`QuotaGraphQLMixin.quota_operations` (async:
  :meth:`QuotaAsyncGraphQLMixin.aquota_operations`): the operations of the request, read with the library's
  own parsing. Without one, the fallback reads the request as GraphQL over HTTP usually puts it
  (:func:`~quotas.graphql.operations.operations_of`), which a library may not;
- a guard at execution: the library's hook where it is about to run a document calls
  :meth:`~_Weighing.quota_admit`, which raises :class:`~quotas.graphql.gate.Unweighed` for an operation the
  gate did not weigh; ``dispatch`` answers it 400 ``query-not-weighed``.

Before the gate, ``dispatch`` runs the CSRF check of :mod:`quotas.graphql.csrf` (a signed-in browser's
unsafe request must carry its token; an API key client needs none): ``as_view()`` marks the view exempt from
Django's middleware check, which would refuse every API client, because the view makes its own.

Django makes a view instance per request, so what the gate read for the request is kept on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from quotas import problems
from quotas.engine import Engine, default_engine
from quotas.graphql.csrf import csrf_failure, csrf_refusal, needs_check
from quotas.graphql.gate import Unweighed, alimit_graphql, limit_graphql
from quotas.graphql.operations import Operation, operations_of
from quotas.graphql.responses import graphql_refusal


class QuotaGraphQLOptions:
    """The options of a limited GraphQL view: ``quota_scope`` selects the plan's limits (as a DRF view's does;
    "" for the plan-wide and path limits); ``max_complexity`` overrides ``QUOTAS['GRAPHQL_MAX_COMPLEXITY']`` for
    this endpoint; ``quota_csrf`` False turns the view's CSRF check off (:mod:`quotas.graphql.csrf`), leaving it
    exempt altogether, as ``csrf_exempt`` did. Each can be a class attribute or an ``as_view()`` argument.
    ``quota_engine`` (a class attribute) is the :class:`~quotas.engine.Engine` that decides.
    """

    quota_engine: Engine = default_engine
    quota_scope: str = ""
    max_complexity: int | None = None
    quota_csrf: bool = True

    def __init__(
        self,
        *args: Any,
        quota_scope: str | None = None,
        max_complexity: int | None = None,
        quota_csrf: bool | None = None,
        **kwargs: Any,
    ):
        # Taken here: graphene-django's view names the keyword arguments it accepts, and refuses others.
        super().__init__(*args, **kwargs)
        if quota_scope is not None:
            self.quota_scope = quota_scope
        if max_complexity is not None:
            self.max_complexity = max_complexity
        if quota_csrf is not None:
            self.quota_csrf = quota_csrf

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        """The library's view function, exempt from ``CsrfViewMiddleware``'s check: ``dispatch`` makes its own,
        for the requests that need it (as DRF's ``APIView.as_view`` and ``SessionAuthentication`` do)."""
        return csrf_exempt(super().as_view(**initkwargs))  # type: ignore[misc]  # the library view's


class _Weighing(QuotaGraphQLOptions):
    """What both mixins keep: the operations the gate weighed for this request, and the guard that checks them."""

    #: The operations the gate weighed for this request; None when it read none (quotas off: nothing to guard).
    quota_weighed: Sequence[Operation] | None = None

    def quota_operations(self, request: HttpRequest) -> Sequence[Operation]:
        """The operations ``request`` asks for, read as the library will read them; this fallback reads GraphQL
        over HTTP's usual places (a library's view overrides it with its own parsing).

        Raises :class:`~quotas.graphql.operations.Unreadable` for a request the library answers with an error.
        """
        return operations_of(request)

    def quota_admit(self, query: Any, operation_name: Any) -> None:
        """Let the library run ``query``'s ``operation_name`` only if the gate weighed it for this request.

        A falsy query passes (the library refuses it before running anything), as does every query when the
        gate read nothing (quotas off). Raises :class:`~quotas.graphql.gate.Unweighed` otherwise.
        """
        weighed = self.quota_weighed
        if weighed is None or not query:
            return
        if Operation(query, operation_name) not in weighed:
            raise Unweighed(f"operation {operation_name!r} of a query of {len(str(query))} characters")


def _not_weighed() -> HttpResponse:
    return graphql_refusal(problems.query_not_weighed())


class QuotaGraphQLMixin(_Weighing):
    """Limits a GraphQL view by its queries' complexity (see :mod:`quotas.graphql.gate`)."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """The library's answer to ``request``, or the refusal (CSRF, then quota) that replaces it."""
        reason = csrf_failure(request) if self.quota_csrf else None
        if reason is not None:
            return csrf_refusal(reason)
        parent = super()

        def read() -> Sequence[Operation]:
            self.quota_weighed = ()  # until read: a request that cannot be read may run nothing
            self.quota_weighed = self.quota_operations(request)
            return self.quota_weighed

        def run() -> HttpResponse:
            try:
                return parent.dispatch(request, *args, **kwargs)  # type: ignore[attr-defined]  # the library view's
            except Unweighed:
                return _not_weighed()

        return limit_graphql(
            request,
            run,
            scope=self.quota_scope,
            max_complexity=self.max_complexity,
            read=read,
            engine=self.quota_engine,
        )


class QuotaAsyncGraphQLMixin(_Weighing):
    """:class:`QuotaGraphQLMixin` for a view whose ``dispatch`` is ``async def`` (strawberry's AsyncGraphQLView)."""

    async def aquota_operations(self, request: HttpRequest) -> Sequence[Operation]:
        """:meth:`~_Weighing.quota_operations` for a library whose parsing is ``async def``."""
        return self.quota_operations(request)

    async def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """The library's answer to ``request``, awaited, or the refusal (CSRF, then quota) that replaces it."""
        # The user and the session are read in sync code: only for a request that may need the check.
        reason = await sync_to_async(csrf_failure)(request) if self.quota_csrf and needs_check(request) else None
        if reason is not None:
            return csrf_refusal(reason)
        parent = super()

        async def read() -> Sequence[Operation]:
            self.quota_weighed = ()
            self.quota_weighed = await self.aquota_operations(request)
            return self.quota_weighed

        async def run() -> HttpResponse:
            try:
                return await parent.dispatch(request, *args, **kwargs)  # type: ignore[attr-defined]  # the library's
            except Unweighed:
                return _not_weighed()

        return await alimit_graphql(
            request,
            run,
            scope=self.quota_scope,
            max_complexity=self.max_complexity,
            read=read,
            engine=self.quota_engine,
        )
