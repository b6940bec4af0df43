"""strawberry's Django ``GraphQLView`` (strawberry-graphql-django's schemas), limited by its queries' complexity.

:class:`QuotaAsyncGraphQLView` is the same for strawberry's ``AsyncGraphQLView`` (under ASGI). Installed with
the ``strawberry`` extra (``pip install django-quota-platform[strawberry]``). In urls.py::

    path("graphql", QuotaGraphQLView.as_view(schema=schema, quota_scope="graphql"))

No ``csrf_exempt``: the views make their own CSRF check (:mod:`quotas.graphql.csrf`), and the GraphiQL page
they serve sets the ``csrftoken`` cookie its script sends back as ``X-CSRFToken`` (as graphene-django's view
does on every answer), so a signed-in user's GraphiQL works without a page of the project setting it first.

The gate reads a request with strawberry's own ``parse_http_body`` (the query string of a GET; the body of a
POST whose ``Content-Type`` contains ``application/json``, or a multipart upload's ``operations`` where the
view allows uploads), and the view keeps what it returned, so it runs the very ``GraphQLRequestData`` the gate
weighed. The guard is where strawberry hands them to the schema: ``execute_single`` in the sync view,
``execute_operation`` (batches and streamed subscriptions included) in the async one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cross_web import HTTPException
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from strawberry.django.views import AsyncGraphQLView, GraphQLView
from strawberry.http import GraphQLRequestData

from quotas.graphql.operations import Operation, Unreadable
from quotas.graphql.views import QuotaAsyncGraphQLMixin, QuotaGraphQLMixin

#: What strawberry's parsing raises for a request it answers with an error (its own 400 for most; a body that is
#: not UTF-8, or JSON that is not an object, its 500): the gate reads no operation, and strawberry answers.
_UNREADABLE = (HTTPException, ValueError, KeyError, AttributeError, TypeError)

Parsed = GraphQLRequestData | list[GraphQLRequestData]


def _operations(parsed: Parsed) -> list[Operation]:
    return [Operation(item.query, item.operation_name) for item in (parsed if isinstance(parsed, list) else [parsed])]


class QuotaGraphQLView(QuotaGraphQLMixin, GraphQLView):
    """strawberry's sync Django view whose requests spend their complexity (see :mod:`quotas.graphql.gate`)."""

    _quota_parsed: Parsed | None = None

    def quota_operations(self, request: HttpRequest) -> Sequence[Operation]:
        """The operations strawberry will run for ``request`` (see the module docstring)."""
        adapter = self.request_adapter_class(request)
        if not self.is_request_allowed(adapter):  # run's 405: nothing runs
            return []
        try:
            parsed = self.parse_http_body(adapter)
        except _UNREADABLE as exc:
            raise Unreadable(str(exc)) from exc
        self._quota_parsed = parsed
        return _operations(parsed)

    def parse_http_body(self, request: Any) -> Parsed:
        """strawberry's parsing of the request, done once: the view runs what the gate read."""
        if self._quota_parsed is not None:
            return self._quota_parsed
        return super().parse_http_body(request)

    def render_graphql_ide(self, request: HttpRequest) -> HttpResponse:
        """strawberry's GraphiQL page, setting the CSRF cookie its script sends back (see the module docstring)."""
        get_token(request)
        return super().render_graphql_ide(request)

    def execute_single(  # noqa: PLR0917  # strawberry's signature
        self,
        request: HttpRequest,
        request_adapter: Any,
        sub_response: Any,
        context: Any,
        root_value: Any,
        request_data: GraphQLRequestData,
    ) -> Any:
        """strawberry's execution of one operation, if the gate weighed it (else
        :class:`~quotas.graphql.gate.Unweighed`, answered 400 by ``dispatch``)."""
        self.quota_admit(request_data.query, request_data.operation_name)
        return super().execute_single(
            request=request,
            request_adapter=request_adapter,
            sub_response=sub_response,
            context=context,
            root_value=root_value,
            request_data=request_data,
        )


# Django's View types dispatch as sync; an async view's (strawberry's own included) is a coroutine function.
class QuotaAsyncGraphQLView(QuotaAsyncGraphQLMixin, AsyncGraphQLView):  # type: ignore[misc]
    """strawberry's async Django view whose requests spend their complexity; the decision is awaited."""

    _quota_parsed: Parsed | None = None

    async def aquota_operations(self, request: HttpRequest) -> Sequence[Operation]:
        """The operations strawberry will run for ``request`` (see the module docstring)."""
        adapter = self.request_adapter_class(request)
        if not self.is_request_allowed(adapter):  # run's 405: nothing runs
            return []
        try:
            parsed = await self.parse_http_body(adapter)
        except _UNREADABLE as exc:
            raise Unreadable(str(exc)) from exc
        self._quota_parsed = parsed
        return _operations(parsed)

    async def parse_http_body(self, request: Any) -> Parsed:
        """strawberry's parsing of the request, done once: the view runs what the gate read."""
        if self._quota_parsed is not None:
            return self._quota_parsed
        return await super().parse_http_body(request)

    async def render_graphql_ide(self, request: HttpRequest) -> HttpResponse:
        """strawberry's GraphiQL page, setting the CSRF cookie its script sends back (see the module docstring)."""
        get_token(request)
        return await super().render_graphql_ide(request)

    async def execute_operation(  # noqa: PLR0917  # strawberry's signature
        self,
        request: HttpRequest,
        request_adapter: Any,
        request_data: Parsed,
        context: Any,
        root_value: Any,
        sub_response: Any,
    ) -> Any:
        """strawberry's execution of the request's operations (one, a batch, or a stream), if the gate weighed
        each (else :class:`~quotas.graphql.gate.Unweighed`, answered 400 by ``dispatch``)."""
        for operation in _operations(request_data):
            self.quota_admit(operation.query, operation.operation_name)
        return await super().execute_operation(
            request=request,
            request_adapter=request_adapter,
            request_data=request_data,
            context=context,
            root_value=root_value,
            sub_response=sub_response,
        )
