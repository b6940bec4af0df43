"""A subscription's webhook endpoints and latest deliveries, as its API and its usage page show them."""

from __future__ import annotations

from typing import Any

from .models import Delivery, Endpoint

#: Deliveries the API lists, newest first.
LATEST = 50


def _iso(moment: Any) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


def summary(subscription_id: int, latest: int = LATEST) -> dict[str, Any]:
    """``endpoints`` (never their secrets) and the ``latest`` ``deliveries`` of subscription ``subscription_id``:
    two queries. A delivery's ``error`` is the kind of its last failure (``Delivery.Failure``), never the detail
    the admin shows: that could tell a customer what the platform's resolver and network look like inside."""
    endpoints = Endpoint.objects.filter(subscription_id=subscription_id).order_by("pk")
    deliveries = (
        Delivery.objects.filter(event__subscription_id=subscription_id)
        .select_related("event", "endpoint", "contact")
        .order_by("-created_at", "-pk")[:latest]
    )
    return {
        "endpoints": [
            {"id": e.pk, "url": e.url, "events": e.events, "is_active": e.is_active,
             "disabled_reason": e.disabled_reason or None, "created_at": _iso(e.created_at)}
            for e in endpoints
        ],
        "deliveries": [
            {"event": {"id": str(d.event_id), "type": d.event.type, "created": _iso(d.event.created_at)},
             "to": d.endpoint.url if d.endpoint else d.contact.email if d.contact else None,
             "status": d.status, "attempts": d.attempts, "response_status": d.response_status,
             "last_attempt_at": _iso(d.last_attempt_at), "next_attempt_at": _iso(d.next_attempt_at),
             "error": d.failure or None}  # the kind only: the detail (addresses, resolver errors) is staff's
            for d in deliveries
        ],
    }  # fmt: skip
