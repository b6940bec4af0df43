from django.urls import path

from .checks import require_apps_it_reads

require_apps_it_reads()  # the views below import the models of plans, usage and adaptive

from . import views  # noqa: E402  (after the check: say which app is missing, not which model failed)

app_name = "dashboard"
urlpatterns = [
    path("", views.index, name="index"),
    path("data.json", views.data, name="data"),
    path("clients/<path:client>/", views.client_detail, name="client"),
]
