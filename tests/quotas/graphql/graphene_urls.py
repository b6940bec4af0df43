"""/graphql served by graphene-django's view, limited (test_graphene.py)."""

import graphene
from django.urls import path

from quotas.graphql.graphene import QuotaGraphQLView
from tests.quotas.graphql.schema_data import BOOKS


class Author(graphene.ObjectType):
    name = graphene.String()


class Book(graphene.ObjectType):
    title = graphene.String()
    author = graphene.Field(Author)


class Query(graphene.ObjectType):
    books = graphene.List(Book)

    def resolve_books(root, info):
        return BOOKS


schema = graphene.Schema(query=Query)


class DriftingView(QuotaGraphQLView):
    """Runs another query than the one it read: what a library that reads a request twice, differently, would
    do. The gate's guard at execution must refuse it (behaviour.py)."""

    def execute_graphql_request(self, request, data, query, variables, operation_name, show_graphiql=False):
        drifted = "{ books { title author { name } } }"
        return super().execute_graphql_request(request, data, drifted, variables, operation_name, show_graphiql)


urlpatterns = [
    path("graphql", QuotaGraphQLView.as_view(schema=schema)),
    path("graphql-small", QuotaGraphQLView.as_view(schema=schema, max_complexity=4)),
    path("graphql-drifting", DriftingView.as_view(schema=schema)),
    path("graphql-batch", QuotaGraphQLView.as_view(schema=schema, batch=True)),
    path("graphql-no-csrf", QuotaGraphQLView.as_view(schema=schema, quota_csrf=False)),
]
