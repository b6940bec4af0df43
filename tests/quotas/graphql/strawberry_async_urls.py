"""/graphql served by strawberry's AsyncGraphQLView, limited (test_strawberry_async.py): the schema and paths
of strawberry_urls.py, so the shared behaviour runs against the async view too."""

from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from quotas.graphql.strawberry import QuotaAsyncGraphQLView
from tests.quotas.graphql.strawberry_urls import AsyncDriftingView, schema

urlpatterns = [
    path("graphql", csrf_exempt(QuotaAsyncGraphQLView.as_view(schema=schema))),
    path("graphql-small", csrf_exempt(QuotaAsyncGraphQLView.as_view(schema=schema, max_complexity=4))),
    path("graphql-drifting", csrf_exempt(AsyncDriftingView.as_view(schema=schema))),
]
