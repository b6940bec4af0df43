"""/graphql served by graphene-django's view, limited (test_graphene.py)."""

import graphene
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

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

urlpatterns = [
    path("graphql", csrf_exempt(QuotaGraphQLView.as_view(schema=schema))),
    path("graphql-small", csrf_exempt(QuotaGraphQLView.as_view(schema=schema, max_complexity=4))),
    path("graphql-batch", csrf_exempt(QuotaGraphQLView.as_view(schema=schema, batch=True))),
]
