from django.apps import AppConfig


class PlansConfig(AppConfig):
    """Plans, subscriptions, API keys and endpoint limits, edited in admin."""

    name = "plans"
    # Not "plans": a project may well have an app of that name, and Django refuses two apps with one label.
    label = "quota_plans"
    verbose_name = "Plans and limits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from quotas import metrics as quota_metrics
        from quotas.metrics_exposition import add_default_series
        from quotas.settings.registry import register
        from quotas.signals import client_banned

        from . import (
            checks,  # noqa: F401  (registers the system checks)
            metrics,
            receivers,
        )
        from .conf import SECTION
        from .feeds import checks as feed_checks  # noqa: F401  (registers the feeds' system checks)

        register(SECTION)  # QUOTAS['ACL_FEEDS'] is checked with QUOTAS and listed in the settings reference

        receivers.connect_rules_changes()
        add_default_series(quota_metrics.active_bans, metrics.active_ban_series)
        add_default_series(quota_metrics.acl_feed_age, metrics.feed_age_series)
        add_default_series(quota_metrics.acl_feed_failures, metrics.feed_failure_series)
        add_default_series(quota_metrics.acl_feed_entries, metrics.feed_entry_series)
        client_banned.connect(receivers.record_ban, dispatch_uid="plans-record-ban")
