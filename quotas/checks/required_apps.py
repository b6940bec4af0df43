"""What the platform's apps that read others' models (the dashboard, the console) check at start: the apps they
read are installed, as a system check and, for their URL modules, before the views are imported."""

from __future__ import annotations

from collections.abc import Iterable

from django.apps import apps
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured


def missing_apps(reads: Iterable[str], *, message: str, hint: str, check_id: str) -> list[CheckMessage]:
    """For the platform's apps that read others' models (the dashboard, the console): one Error naming the apps of
    ``reads`` that are not installed (``message: <apps>.``; hint ``Add <apps> to INSTALLED_APPS<hint>``), or none."""
    missing = [app for app in reads if not apps.is_installed(app)]
    if not missing:
        return []
    return [
        Error(
            f"{message}: {', '.join(missing)}.",
            hint=f"Add {', '.join(repr(app) for app in missing)} to INSTALLED_APPS{hint}",
            id=check_id,
        )
    ]


def raise_missing_apps(errors: list[CheckMessage]) -> None:
    """Raise :class:`~django.core.exceptions.ImproperlyConfigured` with the first of ``errors`` (from
    :func:`missing_apps`): for an app's URL modules, before they import its views. Django's own URL checks import
    every URLconf before the app's check gets to report, so without this a project would see the RuntimeError of
    a model import instead."""
    for error in errors:
        raise ImproperlyConfigured(f"{error.msg} {error.hint} ({error.id})")
