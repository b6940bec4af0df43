"""Recording an event: the row, and a delivery for each endpoint and contact that wants it, in one transaction.

Cheap enough for the request path (a few inserts, no network): what is slow, sending, is the dispatcher's.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from django.db import DatabaseError, IntegrityError, transaction

from plans.models import Subscription

from . import events
from .models import Contact, Delivery, Endpoint, Event

logger = logging.getLogger(__name__)


def record_event(
    event_type: str, subscription: Subscription, dedupe_key: str, data: dict[str, Any], at: datetime
) -> Event | None:
    """Record ``event_type`` for ``subscription`` once per ``dedupe_key``, with its deliveries due now.

    Returns the new event, or None when it was recorded before. Raises database errors.
    """
    created = at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    try:
        with transaction.atomic():
            event = Event.objects.create(
                type=event_type, subscription=subscription, dedupe_key=dedupe_key, data=data, created_at=at
            )
            text = events.body(str(event.id), event_type, created, data)
            hooks = [e for e in Endpoint.objects.filter(subscription=subscription) if e.wants(event_type)]
            contacts = [c for c in Contact.objects.filter(subscription=subscription) if c.wants(event_type)]
            subject, mail = events.email_text(event_type, data) if contacts else ("", "")
            Delivery.objects.bulk_create(
                [Delivery(event=event, endpoint=e, body=text, next_attempt_at=at) for e in hooks]
                + [Delivery(event=event, contact=c, body=f"{subject}\n\n{mail}", next_attempt_at=at) for c in contacts]
            )
    except IntegrityError:
        return None  # recorded before: each event once
    return event


def record_quietly(
    event_type: str, subscription: Subscription, dedupe_key: str, data: dict[str, Any], at: datetime
) -> Event | None:
    """:func:`record_event` for a signal receiver on the request path: a database failure is logged, not raised
    (the request must not fail because its notification could not be stored)."""
    try:
        return record_event(event_type, subscription, dedupe_key, data, at)
    except DatabaseError:
        logger.exception("notifications: could not record a %s event", event_type)
        return None
