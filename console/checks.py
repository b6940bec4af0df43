"""System checks of the console app (ids quota_console.E0xx). None opens a connection."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error, Tags, register
from django.core.exceptions import ImproperlyConfigured

#: The apps whose models the console changes (keys and caps: plans; webhooks and contacts: notifications).
READS = ("plans", "notifications")


@register(Tags.compatibility)
def check_apps_it_reads(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """The console installed without an app it manages: its URLs cannot even be imported."""
    missing = [app for app in READS if not apps.is_installed(app)]
    if not missing:
        return []
    return [
        Error(
            f"The console manages the models of apps that are not in INSTALLED_APPS: {', '.join(missing)}.",
            hint=f"Add {', '.join(repr(app) for app in missing)} to INSTALLED_APPS (and, for notifications, "
            "its extra: pip install 'django-quota-platform[notifications]'), or remove 'console'.",
            id="quota_console.E010",
        )
    ]


def require_apps_it_reads() -> None:
    """Raise :class:`ImproperlyConfigured` with quota_console.E010's message when an app the console manages is
    missing: for the URL modules, before they import the views (Django imports every URLconf before this app's
    check gets to report, and a model's RuntimeError would say less)."""
    for error in check_apps_it_reads():
        raise ImproperlyConfigured(f"{error.msg} {error.hint} ({error.id})")
