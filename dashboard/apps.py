from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The staff dashboard."""

    name = "dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
