"""/graphql served by strawberry's AsyncGraphQLView, limited (test_strawberry_async.py): the schema and paths
of strawberry_urls.py, so the shared behaviour runs against the async view too."""

from django.urls import path

from quotas.graphql.strawberry import QuotaAsyncGraphQLView
from tests.quotas.graphql.strawberry_urls import AsyncDriftingView, schema

urlpatterns = [
    path("graphql", QuotaAsyncGraphQLView.as_view(schema=schema)),
    path("graphql-small", QuotaAsyncGraphQLView.as_view(schema=schema, max_complexity=4)),
    path("graphql-drifting", AsyncDriftingView.as_view(schema=schema)),
    path("graphql-no-csrf", QuotaAsyncGraphQLView.as_view(schema=schema, quota_csrf=False)),
]
