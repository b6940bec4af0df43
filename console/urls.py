"""Mount with ``path("api/v1/", include("console.urls"))``: the self-service API beside the usage API."""

from django.urls import path

from .api.account import AccountView, AuditView

app_name = "console"
urlpatterns = [
    path("account", AccountView.as_view(), name="account"),
    path("subscriptions/<int:subscription_id>/audit", AuditView.as_view(), name="audit"),
]
