from django.apps import AppConfig


class NotificationsAppConfig(AppConfig):
    """Signed webhooks and e-mail to a subscription's endpoints and contacts, sent off the request path."""

    name = "notifications"
    # Not "notifications": a project may well have an app of that name, and Django refuses two apps with one label.
    label = "quota_notifications"
    verbose_name = "Notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from quotas.settings.registry import register
        from quotas.signals import budget_threshold_crossed, spend_threshold_reached

        from . import checks, receivers, thresholds  # noqa: F401  (checks registers the system checks)
        from .conf import SECTION

        register(SECTION)  # QUOTAS['NOTIFICATIONS'] is checked with QUOTAS and listed in the settings reference

        budget_threshold_crossed.connect(receivers.budget_event, dispatch_uid="notifications-budget")
        spend_threshold_reached.connect(thresholds.record_crossing, dispatch_uid="notifications-own-threshold")
