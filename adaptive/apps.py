from django.apps import AppConfig


class AdaptiveAppConfig(AppConfig):
    """Load-driven limit multipliers (Celery beat controller)."""

    name = "adaptive"
    # Not "adaptive": a project may well have an app of that name, and Django refuses two apps with one label.
    label = "quota_adaptive"
    verbose_name = "Adaptive limits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from quotas import metrics
        from quotas.metrics_exposition import add_default_series
        from quotas.settings.registry import register

        from . import checks  # registers the system checks
        from .conf import SECTION

        register(SECTION)  # QUOTAS['ADAPTIVE'] is checked with QUOTAS and listed in the settings reference

        if "psutil" in checks.missing_extra():
            return  # the reporter cannot be imported without it: adaptive.E012 says what to install, not a traceback
        from .reporter import signal_series

        # The load signals are in /metrics from the first scrape, before the controller's first run.
        add_default_series(metrics.load_signal, signal_series)
