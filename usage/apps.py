from django.apps import AppConfig


class UsageConfig(AppConfig):
    """Usage records flushed from Redis, budget alerts, and the usage-report API."""

    name = "usage"
    # Not "usage": a project may well have an app of that name, and Django refuses two apps with one label.
    label = "quota_usage"
    verbose_name = "Usage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from quotas import metrics
        from quotas.metrics_exposition import add_default_series
        from quotas.signals import budget_threshold_crossed

        from . import (
            checks,  # noqa: F401  (registers the system checks)
            flush_mark,
            receivers,
        )

        add_default_series(metrics.usage_flush_lag, flush_mark.flush_lag_series)
        budget_threshold_crossed.connect(
            receivers.record_budget_alert, dispatch_uid="usage-record-budget-alert", weak=False
        )
