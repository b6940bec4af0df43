"""graphene-django's ``GraphQLView``, limited by its queries' complexity.

Installed with the ``graphene`` extra (``pip install django-quota-platform[graphene]``). In urls.py::

    path("graphql", QuotaGraphQLView.as_view(schema=schema, quota_scope="graphql"))

No ``csrf_exempt``: the view makes its own CSRF check (:mod:`quotas.graphql.csrf`); graphene-django's
``dispatch`` sets the ``csrftoken`` cookie its GraphiQL sends back as ``X-CSRFToken``.

The gate reads a request with graphene-django's own parsing, as its ``dispatch`` does: ``parse_body`` (kept,
so the view runs the very data the gate read), then ``get_graphql_params`` for the body (a batch view: for
each of its items), which takes ``query`` and ``operationName`` each from the URL if it is there, else from the
body. Its ``execute_graphql_request``, where a document is about to be parsed and run, is the guard.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from django.http import HttpRequest
from graphene_django.views import GraphQLView, HttpError

from quotas.graphql.operations import Operation, Unreadable
from quotas.graphql.views import QuotaGraphQLMixin

_UNREAD = object()


class QuotaGraphQLView(QuotaGraphQLMixin, GraphQLView):
    """graphene-django's view whose requests spend their complexity (see :mod:`quotas.graphql.gate`)."""

    _quota_body: Any = _UNREAD

    def quota_operations(self, request: HttpRequest) -> Sequence[Operation]:
        """The operations graphene-django will run for ``request`` (see the module docstring)."""
        if (request.method or "").lower() not in ("get", "post"):  # dispatch's 405: nothing runs
            return []
        try:
            body = self.parse_body(request)
        except HttpError as exc:  # not JSON, a batch that is not a list...: graphene-django's 400
            raise Unreadable(exc.message) from exc
        self._quota_body = body
        return list(self._operations(request, body))

    def _operations(self, request: HttpRequest, body: Any) -> Iterator[Operation]:
        # As dispatch: a batch view runs each item of the body, any other view the body itself.
        for item in body if self.batch else [body]:
            try:
                query, _variables, operation_name, _id = self.get_graphql_params(request, item)
            except (HttpError, AttributeError, TypeError):
                # Variables that are not JSON (graphene-django's 400), an item that is not an object (its 500):
                # the view stops at this item, after running those before it.
                return
            yield Operation(query, operation_name)

    def parse_body(self, request: HttpRequest) -> Any:
        """graphene-django's parsing of ``request``'s body, done once: the view runs what the gate read."""
        if self._quota_body is not _UNREAD:
            return self._quota_body
        return super().parse_body(request)

    def execute_graphql_request(  # noqa: PLR0917  # graphene-django's signature
        self,
        request: HttpRequest,
        data: Any,
        query: Any,
        variables: Any,
        operation_name: Any,
        show_graphiql: bool = False,
    ) -> Any:
        """graphene-django's parse, validation and execution of ``query``, if the gate weighed it (else
        :class:`~quotas.graphql.gate.Unweighed`, answered 400 by ``dispatch``)."""
        self.quota_admit(query, operation_name)
        return super().execute_graphql_request(request, data, query, variables, operation_name, show_graphiql)
