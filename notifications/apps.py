from django.apps import AppConfig


class NotificationsAppConfig(AppConfig):
    """Signed webhooks and e-mail to a subscription's endpoints and contacts, sent off the request path."""

    name = "notifications"
    # Not "notifications": a project may well have an app of that name, and Django refuses two apps with one label.
    label = "quota_notifications"
    verbose_name = "Notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from quotas.signals import budget_threshold_crossed

        from . import checks, receivers  # noqa: F401  (checks registers the system checks)

        budget_threshold_crossed.connect(receivers.budget_event, dispatch_uid="notifications-budget")
