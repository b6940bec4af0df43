"""System checks of the dashboard app (ids dashboard.E0xx). None opens a connection."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.checks import CheckMessage, Tags, register

from quotas.checks import missing_apps, raise_missing_apps

#: The apps whose models the dashboard's views read (dashboard/queries.py, views.py, client_views.py).
READS = ("plans", "usage", "adaptive")


@register(Tags.compatibility)
def check_apps_it_reads(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """The dashboard installed without an app it reads: its URLs cannot even be imported."""
    return missing_apps(
        READS,
        message="The dashboard reads the models of apps that are not in INSTALLED_APPS",
        hint=f" (the dashboard reads {', '.join(READS)}), or remove 'dashboard'.",
        check_id="dashboard.E001",
    )


def require_apps_it_reads() -> None:
    """Raise ImproperlyConfigured with dashboard.E001's message when an app the dashboard reads is missing (for
    the URL modules, before they import the views: see :func:`quotas.checks.raise_missing_apps`)."""
    raise_missing_apps(check_apps_it_reads())
