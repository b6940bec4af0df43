"""Celery tasks of the usage app: thin shells around :mod:`usage.flush`."""

from __future__ import annotations

import logging
from dataclasses import asdict

from celery import shared_task
from django.db import DatabaseError

from quotas.api import STORE_ERRORS
from quotas.conf import quota_settings

from .flush import flush_usage

logger = logging.getLogger(__name__)


@shared_task(
    name="usage.flush",
    acks_late=True,  # safe: a flush is idempotent, and a lost one is redone by the next
    autoretry_for=(DatabaseError, *STORE_ERRORS),  # a cluster's errors too (see quotas.store.connect)
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=5,
)
def flush() -> dict:
    """Copy the Redis usage counters to the database (see :func:`usage.flush.flush_usage`)."""
    logger.info("usage flush started")
    options = quota_settings.USAGE_FLUSH  # QUOTAS['USAGE_FLUSH'], read at each run
    report = flush_usage(batch_size=int(options["BATCH_SIZE"]), batch_delay=float(options["BATCH_DELAY"]))
    logger.info(
        "usage flush finished: %d keys, %d rows, %d written, %d skipped in %.2f s",
        report.keys, report.rows, report.written, report.skipped, report.seconds,
    )  # fmt: skip
    return {k: v for k, v in asdict(report).items() if k != "days"}
