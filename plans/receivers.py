"""Records what the engine reports: bans become ClientBan rows for the admin."""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError

from .models import ClientBan, Plan, Subscription

logger = logging.getLogger(__name__)


def record_ban(*, client_tag: str, subscription_id: int | None, plan_id: int | None, until: Any, **kwargs: Any) -> None:
    """Store a ban so that staff can see and lift it; a database error never fails the request."""
    try:
        ClientBan.objects.create(
            client=client_tag,
            subscription=Subscription.objects.filter(pk=subscription_id).first() if subscription_id else None,
            plan=Plan.objects.filter(pk=plan_id).first() if plan_id else None,
            until=until,
        )
    except DatabaseError:
        logger.exception("plans: could not record the ban of %s", client_tag)
