from django.apps import AppConfig


class AdaptiveConfig(AppConfig):
    """Load-driven limit multipliers (Celery beat controller)."""

    name = "adaptive"
    verbose_name = "Adaptive limits"
