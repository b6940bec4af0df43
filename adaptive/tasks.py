"""Celery tasks of the adaptive app: a thin shell around :func:`adaptive.controller.run_controller`."""

from __future__ import annotations

import logging

from celery import shared_task

from quotas.exceptions import StoreUnavailable

from .controller import run_controller

logger = logging.getLogger(__name__)


# A run takes milliseconds; one stuck on Redis must not hold the worker past the next runs (every few seconds).
@shared_task(name="adaptive.control", ignore_result=True, soft_time_limit=20, time_limit=30)
def control() -> dict | None:
    """One controller run (beat sends one every ``QUOTAS['ADAPTIVE']['INTERVAL']`` seconds).

    Never retried: the next run comes within seconds and reads fresher load. A Redis failure is
    logged and the run skipped; the published multipliers expire on their own if it lasts.
    """
    try:
        outcome = run_controller()
    except StoreUnavailable as exc:
        logger.warning("adaptive: controller run skipped, Redis unusable: %s", exc)
        return None
    if outcome is None:
        return None
    return {"action": outcome.action, "zone": outcome.zone, "level": outcome.state.level, "changed": outcome.changed}
