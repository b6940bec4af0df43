"""Celery task: a thin shell over :func:`notifications.dispatch.dispatch_due`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from celery import shared_task

from .dispatch import dispatch_due
from .watch import watch


# A run starts no delivery after lanes.RUN_FOR (30 s) and each ends by its TIMEOUT (at most 60 s).
@shared_task(name="notifications.dispatch", ignore_result=True, soft_time_limit=120, time_limit=150)
def dispatch() -> dict[str, Any]:
    """Send the webhooks and e-mails that are due (run every few seconds by beat)."""
    return asdict(dispatch_due())


@shared_task(name="notifications.watch", ignore_result=True, soft_time_limit=240, time_limit=300)
def watch_task() -> dict[str, Any]:
    """Record bans started and ended, keys about to expire, sustained refusals and the thresholds subscriptions
    set for themselves (run every minute by beat)."""
    return asdict(watch())
