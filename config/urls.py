from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from quotas.http.views import healthz, metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("dashboard/", include("dashboard.urls")),
    path("usage/account/", include("console.page_urls")),  # owners and members run their subscription
    path("usage/", include("dashboard.client_urls")),
    path("api/demo/", include("demo.urls")),
    path("api/v1/", include("usage.urls")),
    path("api/v1/", include("notifications.urls")),  # a subscription's own webhooks and deliveries
    path("api/v1/", include("console.urls")),  # the customer's self-service API
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
]
