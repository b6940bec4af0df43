"""/graphql served by strawberry's Django view, limited (test_strawberry.py); ``plans`` is a strawberry-django
type over the plans app's model."""

import strawberry
import strawberry_django
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from plans.models import Plan
from quotas.graphql.strawberry import QuotaAsyncGraphQLView, QuotaGraphQLView
from tests.quotas.graphql.schema_data import BOOKS


@strawberry.type
class Author:
    name: str


@strawberry.type
class Book:
    title: str
    author: Author


@strawberry_django.type(Plan)
class PlanType:
    slug: strawberry.auto
    name: strawberry.auto


@strawberry.type
class Query:
    plans: list[PlanType] = strawberry_django.field()

    @strawberry.field
    def books(self) -> list[Book]:
        return [Book(title=b["title"], author=Author(name=b["author"]["name"])) for b in BOOKS]


schema = strawberry.Schema(query=Query)

urlpatterns = [
    path("graphql", csrf_exempt(QuotaGraphQLView.as_view(schema=schema))),
    path("graphql-small", csrf_exempt(QuotaGraphQLView.as_view(schema=schema, max_complexity=4))),
    path("agraphql", csrf_exempt(QuotaAsyncGraphQLView.as_view(schema=schema, max_complexity=10))),
]
