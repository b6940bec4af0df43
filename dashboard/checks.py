"""System checks of the dashboard app (ids dashboard.E0xx). None opens a connection."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error, Tags, register
from django.core.exceptions import ImproperlyConfigured

#: The apps whose models the dashboard's views read (dashboard/queries.py, views.py, client_views.py).
READS = ("plans", "usage", "adaptive")


@register(Tags.compatibility)
def check_apps_it_reads(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """The dashboard installed without an app it reads: its URLs cannot even be imported."""
    missing = [app for app in READS if not apps.is_installed(app)]
    if not missing:
        return []
    return [
        Error(
            f"The dashboard reads the models of apps that are not in INSTALLED_APPS: {', '.join(missing)}.",
            hint=f"Add {', '.join(repr(app) for app in missing)} to INSTALLED_APPS "
            f"(the dashboard reads {', '.join(READS)}), or remove 'dashboard'.",
            id="dashboard.E001",
        )
    ]


def require_apps_it_reads() -> None:
    """Raise :class:`ImproperlyConfigured` with dashboard.E001's message when an app the dashboard reads is missing.

    For the URL modules, before they import the views: Django's own URL checks import every URLconf before this
    app's check gets to report, so without this a project would see the RuntimeError of a model import instead.
    """
    for error in check_apps_it_reads():
        raise ImproperlyConfigured(f"{error.msg} {error.hint} ({error.id})")
