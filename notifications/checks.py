"""System checks of the notifications app (ids notifications.E0xx / W0xx): its settings, its extra and the
beat schedule that sends what is due. None opens a connection."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

TASKS = {"notifications.dispatch": 5.0, "notifications.watch": 60.0}  # each with the schedule the docs use
#: What the [notifications] extra installs: Celery sends, cryptography keeps endpoint secrets encrypted.
EXTRA = ("celery", "cryptography")


@register(Tags.compatibility)
def check_beat_schedule(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Celery beat must run the dispatcher (or events are recorded and never sent) and the watcher (or bans, key
    expiries and sustained refusals are never found)."""
    schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None) or {}
    scheduled = {e.get("task") for e in schedule.values() if isinstance(e, dict)}
    return [
        Warning(
            f"No CELERY_BEAT_SCHEDULE entry runs {task!r}: "
            + ("webhooks and e-mails are recorded but never sent." if task.endswith("dispatch") else
               "bans, expiring keys and sustained refusals are never notified."),
            hint=f'Add {{"task": "{task}", "schedule": {every}}} (see docs/notifications.md).',
            id="notifications.W002",
        )
        for task, every in TASKS.items()
        if task not in scheduled
    ]  # fmt: skip


@register(Tags.compatibility)
def check_extra(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """The ``[notifications]`` extra is installed."""
    missing = [name for name in EXTRA if importlib.util.find_spec(name) is None]
    if not missing:
        return []
    return [
        Error(
            f"The notifications app needs {', '.join(missing)}, which is not installed.",
            hint='pip install "django-quota-platform[notifications]"',
            id="notifications.E005",
        )
    ]
