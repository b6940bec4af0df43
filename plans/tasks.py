"""Celery task of the plans app: a thin shell over :func:`plans.feeds.refresh.refresh_feeds`."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from celery import shared_task
from django.db import DatabaseError

from .feeds.refresh import refresh_feeds

logger = logging.getLogger(__name__)


@shared_task(
    name="plans.refresh_acl_feeds",
    acks_late=True,  # safe: a refresh stores what the feed says now, so running it twice changes nothing more
    autoretry_for=(DatabaseError,),  # a feed's own failures are recorded on it, never retried here
    retry_backoff=30,
    retry_backoff_max=600,
    max_retries=3,
    soft_time_limit=600,  # each feed's fetch ends by its own TIMEOUT; this bounds them all
    time_limit=660,
)
def refresh_acl_feeds() -> dict[str, Any]:
    """Fetch every enabled allow or deny list feed and apply the good ones (run by beat every ``INTERVAL``)."""
    report = refresh_feeds()
    logger.info(
        "plans: ACL feeds refreshed: %d changed, %d unchanged, %d failed",
        len(report.changed), len(report.unchanged), len(report.failed),
    )  # fmt: skip
    return asdict(report)
