from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """The decision service, its store and runtime, and the front doors (DRF, plain Django)."""

    name = "quotas"
    verbose_name = "Quotas"

    def ready(self) -> None:
        from django.apps import apps
        from django.core.signals import setting_changed

        from quotas import (
            checks,  # noqa: F401  (registers the system checks)
            metrics,
        )
        from quotas.engine import reset_engines
        from quotas.http.views import plan_multipliers
        from quotas.identity.auth_failures import forget_blocks, on_login_failed
        from quotas.metrics_exposition import add_default_series
        from quotas.signals import remembered_state_stale

        def _on_setting_changed(*, setting: str, **kwargs: object) -> None:
            # override_settings(QUOTAS=...) in tests must not see a stale runtime.
            if setting in ("QUOTAS", "REST_FRAMEWORK"):
                reset_engines()

        setting_changed.connect(_on_setting_changed, weak=False, dispatch_uid="quotas-settings")
        # A rules change or a new runtime: the failed-authentication blocks this process learnt are asked again.
        remembered_state_stale.connect(forget_blocks, weak=False, dispatch_uid="quotas-forget-blocks")
        # Every plan's multiplier is in /metrics from the first scrape, at 1 until the controller cuts it.
        add_default_series(metrics.adaptive_multiplier, plan_multipliers)
        if apps.is_installed("django.contrib.auth"):
            from django.contrib.auth.signals import user_logged_in, user_login_failed

            from quotas.identity.devices import on_logged_in

            # Counts wrong passwords (admin login, HTTP Basic) toward QUOTAS['FAILED_AUTH_LIMITS'].
            user_login_failed.connect(on_login_failed, weak=False, dispatch_uid="quotas-failed-auth")
            # A browser that signs in becomes a trusted device for that user (quotas/identity/devices.py).
            user_logged_in.connect(on_logged_in, weak=False, dispatch_uid="quotas-trusted-device")
        # A Celery worker or beat on memory:// in production refuses to start, as a server does (quotas.E091).
        from quotas.startup import connect_celery

        connect_celery()
        if apps.is_installed("drf_spectacular"):
            # drf-spectacular is optional: its extensions (the API-key security scheme) register on import.
            from quotas import openapi  # noqa: F401
