from django.apps import AppConfig


class ConsoleAppConfig(AppConfig):
    """A subscription's owners and members, the audit log of their changes, and the self-service API."""

    name = "console"
    # Not "console": a project may well have an app of that name, and Django refuses two apps with one label.
    label = "quota_console"
    verbose_name = "Customer console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from quotas.settings.registry import register

        from . import checks  # noqa: F401  (registers the system checks)
        from .conf import SECTION

        register(SECTION)  # QUOTAS['CONSOLE'] is checked with QUOTAS and listed in the settings reference
