"""System checks of the console app (ids quota_console.E0xx). None opens a connection."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.checks import CheckMessage, Tags, register

from quotas.checks import missing_apps, raise_missing_apps

#: The apps whose models the console changes (keys and caps: plans; webhooks and contacts: notifications).
READS = ("plans", "notifications")


@register(Tags.compatibility)
def check_apps_it_reads(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """The console installed without an app it manages: its URLs cannot even be imported."""
    return missing_apps(
        READS,
        message="The console manages the models of apps that are not in INSTALLED_APPS",
        hint=" (and, for notifications, its extra: pip install 'django-quota-platform[notifications]'), or remove "
        "'console'.",
        check_id="quota_console.E010",
    )


def require_apps_it_reads() -> None:
    """Raise ImproperlyConfigured with quota_console.E010's message when an app the console manages is missing
    (for the URL modules, before they import the views: see :func:`quotas.checks.raise_missing_apps`)."""
    raise_missing_apps(check_apps_it_reads())
