"""System checks of the usage app (ids usage.E0xx). None opens a connection."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from .flush import SUPPORTED_VENDORS


@register(Tags.compatibility)
def check_flush_database(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """The flush upserts with SQL only some databases have: on any other, every flush would fail."""
    try:
        vendor = connection.vendor  # the backend's name; no connection is opened
    except ImproperlyConfigured:  # the backend cannot be loaded: Django says so itself
        return []
    if vendor in SUPPORTED_VENDORS:
        return []
    return [
        Error(
            f"The usage flush cannot write to the default database ({vendor}): it supports "
            f"{', '.join(SUPPORTED_VENDORS)}.",
            hint="Use PostgreSQL, MySQL/MariaDB or SQLite as the default database to flush usage records.",
            id="usage.E001",
        )
    ]
