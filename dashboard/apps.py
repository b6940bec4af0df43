from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The staff dashboard."""

    name = "dashboard"
    # Not "dashboard": a project may well have an app of that name, and Django refuses two apps with one label.
    label = "quota_dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
