"""/graphql served by strawberry's Django view, limited (test_strawberry.py); ``plans`` is a strawberry-django
type over the plans app's model."""

import dataclasses

import strawberry
import strawberry_django
from django.urls import path

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
DRIFTED = "{ books { title author { name } } }"


class DriftingView(QuotaGraphQLView):
    """Runs another query than the one it read (see graphene_urls.DriftingView): the guard must refuse it."""

    def execute_single(self, *args, request_data, **kwargs):
        return super().execute_single(*args, request_data=dataclasses.replace(request_data, query=DRIFTED), **kwargs)


class AsyncDriftingView(QuotaAsyncGraphQLView):
    """DriftingView for the async view, where every operation goes through execute_operation."""

    async def execute_operation(self, *args, request_data, **kwargs):
        drifted = dataclasses.replace(request_data, query=DRIFTED)
        return await super().execute_operation(*args, request_data=drifted, **kwargs)


urlpatterns = [
    path("graphql", QuotaGraphQLView.as_view(schema=schema)),
    path("graphql-small", QuotaGraphQLView.as_view(schema=schema, max_complexity=4)),
    path("graphql-drifting", DriftingView.as_view(schema=schema)),
    path("graphql-no-csrf", QuotaGraphQLView.as_view(schema=schema, quota_csrf=False)),
    path("agraphql", QuotaAsyncGraphQLView.as_view(schema=schema, max_complexity=10)),
]
