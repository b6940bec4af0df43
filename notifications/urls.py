"""Mount with ``path("api/v1/", include("notifications.urls"))``."""

from django.urls import path

from .views import NotificationsView

app_name = "notifications"
urlpatterns = [path("notifications", NotificationsView.as_view(), name="list")]
