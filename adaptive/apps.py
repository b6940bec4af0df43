from django.apps import AppConfig


class AdaptiveAppConfig(AppConfig):
    """Load-driven limit multipliers (Celery beat controller)."""

    name = "adaptive"
    verbose_name = "Adaptive limits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from quotas.observability import metrics

        from . import checks  # noqa: F401  (registers the system checks)
        from .reporter import signal_series

        # The load signals are in /metrics from the first scrape, before the controller's first run.
        metrics.add_default_series(metrics.load_signal, signal_series)
