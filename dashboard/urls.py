from django.urls import path

from . import views

app_name = "dashboard"
urlpatterns = [
    path("", views.index, name="index"),
    path("data.json", views.data, name="data"),
    path("clients/<path:client>/", views.client_detail, name="client"),
]
