from django.apps import AppConfig


class DemoConfig(AppConfig):
    """A small API protected by QuotaThrottle, to try the platform."""

    name = "demo"
    verbose_name = "Demo API"
