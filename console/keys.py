"""A subscription's API keys: list, create, revoke and roll them, the one implementation the API and the page
both call.

A key's raw text is returned once, by the function that made it (create, roll); the database keeps its hash only,
and no audit entry holds either. Each change is checked (Django's ``ValidationError``, naming the field), made and
written to the audit log in one transaction.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from rest_framework.request import Request

from plans.models import APIKey

from . import audit
from .access import Account
from .conf import MAX_OVERLAP_SECONDS
from .errors import Missing

NO_SUCH_KEY = "No such API key on this subscription."
IN_THE_PAST = "This moment is in the past: the key would never work."


def keys_of(account: Account) -> QuerySet[APIKey]:
    """The subscription's keys, newest first."""
    return APIKey.objects.filter(subscription=account.subscription)


def key_of(account: Account, key_id: int, *, lock: bool = False) -> APIKey:
    """Key ``key_id`` of the subscription (``lock``: its row locked to the end of the transaction); raises
    :class:`~console.errors.Missing` for any other."""
    keys = keys_of(account)
    key = (keys.select_for_update() if lock else keys).filter(pk=key_id).first()
    if key is None:
        raise Missing(NO_SUCH_KEY)
    return key


def check_expiry(expires_at: datetime | None) -> None:
    """Raise ``ValidationError`` for an expiry already past: a typo, the key would never work (as the admin and
    ``issue_key`` refuse it)."""
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError({"expires_at": [IN_THE_PAST]})


def check_overlap(overlap_seconds: int) -> None:
    """Raise ``ValidationError`` for an overlap outside 0 to :data:`~console.conf.MAX_OVERLAP_SECONDS`."""
    if not 0 <= overlap_seconds <= MAX_OVERLAP_SECONDS:
        raise ValidationError({"overlap_seconds": [f"From 0 to {MAX_OVERLAP_SECONDS} seconds (a week)."]})


def create_key(
    request: Request | HttpRequest, account: Account, name: str = "", expires_at: datetime | None = None
) -> tuple[APIKey, str]:
    """A new key of the subscription, valid until ``expires_at`` (None: never), and its raw text (to show once)."""
    check_expiry(expires_at)
    with transaction.atomic():
        key, raw = APIKey.issue(account.subscription, name=name, expires_at=expires_at)
        audit.record(request, account, "key.create", key.prefix, name=key.name, expires_at=_moment(key.expires_at))
    return key, raw


def revoke_key(request: Request | HttpRequest, account: Account, key_id: int) -> APIKey:
    """Revoke key ``key_id`` now; a revoked key stays as it was (and is not audited again)."""
    with transaction.atomic():
        key = key_of(account, key_id, lock=True)
        if key.revoked_at is None:
            key.revoke()
            audit.record(request, account, "key.revoke", key.prefix, name=key.name)
    return key


def roll_key(
    request: Request | HttpRequest,
    account: Account,
    key_id: int,
    overlap_seconds: int,
    name: str | None = None,
    *,
    expires_at: datetime | None = None,
) -> tuple[APIKey, APIKey, str]:
    """Replace key ``key_id`` by a new one (named ``name``, else as the old one; expiring at ``expires_at``, else
    when the old one would have): the old key, the new one and its raw text (to show once). The old key works for
    ``overlap_seconds`` more (or until its own expiry, if sooner). A revoked, expired or already rolled key is
    refused (``ValidationError`` on ``key_id``, saying why), as is an ``expires_at`` already past."""
    check_overlap(overlap_seconds)
    check_expiry(expires_at)
    with transaction.atomic():
        old = key_of(account, key_id, lock=True)
        try:
            new, raw = old.roll(timedelta(seconds=overlap_seconds), name, expires_at)
        except ValueError as exc:
            raise ValidationError({"key_id": [str(exc)]}) from exc
        audit.record(request, account, "key.roll", old.prefix, name=old.name, new_key=new.prefix, new_name=new.name,
                     expires_at=_moment(old.expires_at), overlap_seconds=overlap_seconds,
                     new_expires_at=_moment(new.expires_at))  # fmt: skip
    return old, new, raw


def _moment(value: Any) -> str | None:
    """A moment as the audit log's detail (JSON) keeps it."""
    return value.isoformat() if value is not None else None


__all__ = ["check_expiry", "check_overlap", "create_key", "key_of", "keys_of", "revoke_key", "roll_key"]
