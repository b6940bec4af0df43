"""Celery tasks of the usage app: thin shells around :mod:`usage.flush`."""

from __future__ import annotations

import logging
from dataclasses import asdict

from celery import shared_task
from django.db import DatabaseError

from quotas.internal_api import STORE_ERRORS
from quotas.settings import quota_settings

from .flush import flush_usage
from .retention import prune as prune_rows

logger = logging.getLogger(__name__)


@shared_task(
    name="usage.flush",
    acks_late=True,  # safe: a flush is idempotent, and a lost one is redone by the next
    autoretry_for=(DatabaseError, *STORE_ERRORS),  # a cluster's errors too (see quotas.store.backends.connect)
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=5,
    soft_time_limit=240,  # a flush stopped half way is safe: the next one copies the rest (tested)
    time_limit=300,
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


@shared_task(
    name="usage.prune",
    acks_late=True,  # safe: deleting what is past its retention twice deletes nothing more
    autoretry_for=(DatabaseError,),
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=5,
    soft_time_limit=1_800,  # deletes in batches; what is left goes tomorrow
    time_limit=2_100,
)
def prune() -> dict:
    """Delete usage records, budget alerts and ban records older than ``QUOTAS['RETENTION']`` keeps."""
    report = prune_rows()
    logger.info(
        "usage prune: %d usage records, %d budget alerts, %d ban records deleted",
        report.usage_records, report.budget_alerts, report.bans,
    )  # fmt: skip
    return asdict(report)
