from django.urls import path

from . import views

app_name = "usage"
urlpatterns = [
    path("usage/", views.UsageReportView.as_view(), name="report"),
    path("usage/current", views.CurrentUsageView.as_view(), name="current"),
    path("usage/refusals", views.RefusalsView.as_view(), name="refusals"),
]
