from django.urls import path

from . import views

app_name = "demo"
urlpatterns = [
    path("ping", views.PingView.as_view(), name="ping"),
    path("search", views.SearchView.as_view(), name="search"),
    path("generate", views.GenerateView.as_view(), name="generate"),
]
