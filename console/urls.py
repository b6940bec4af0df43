"""Mount with ``path("api/v1/", include("console.urls"))``: the self-service API beside the usage API."""

from django.urls import path

from .api.account import AccountView, AuditView
from .api.caps import CapsView, CapView, ThresholdsView

app_name = "console"
urlpatterns = [
    path("account", AccountView.as_view(), name="account"),
    path("subscriptions/<int:subscription_id>/audit", AuditView.as_view(), name="audit"),
    path("subscriptions/<int:subscription_id>/caps", CapsView.as_view(), name="caps"),
    path("subscriptions/<int:subscription_id>/caps/<str:period>", CapView.as_view(), name="cap"),
    path("subscriptions/<int:subscription_id>/thresholds", ThresholdsView.as_view(), name="thresholds"),
]
