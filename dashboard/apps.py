from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The staff dashboard."""

    name = "dashboard"
    verbose_name = "Dashboard"
