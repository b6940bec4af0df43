from django.apps import AppConfig


class AdaptiveAppConfig(AppConfig):
    """Load-driven limit multipliers (Celery beat controller)."""

    name = "adaptive"
    verbose_name = "Adaptive limits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
