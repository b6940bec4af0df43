"""The audit log's one writer and one reader: :func:`record` is called by every change the console makes, in the
change's own transaction, so a change and its entry are saved together or not at all; :func:`log_of` is what the
API and the page show, and decides who may see it."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from rest_framework.request import Request

from quotas.internal_api import client_ip

from .access import Account, require_owner
from .models import AuditEntry

#: Entries the log shows, newest first.
AUDIT_PAGE = 100


def record(
    request: Request | HttpRequest, account: Account, action: str, target: str = "", *, by: str = "", **detail: Any
) -> AuditEntry:
    """Write that ``account``'s caller did ``action`` to ``target`` (with ``detail``, never a secret), from the
    API (a DRF request) or the page (a Django request), and from which address. ``by`` names an actor who is
    neither a user nor a key (a contact following its confirmation link): their address is not kept, since the
    owners who read the log have no claim to where a stranger reads their mail."""
    return AuditEntry.objects.create(
        subscription=account.subscription,
        subscription_name=account.subscription.name[:200],
        actor=account.user,
        actor_name=(by or account.actor_name)[:200],
        action=action,
        target=target[:200],
        detail=detail,
        # A DRF request answers META as the HttpRequest it wraps (public delegation), so both kinds read alike.
        address=None if by else str(client_ip(request)),
    )


def log_of(account: Account) -> QuerySet[AuditEntry]:
    """The subscription's last :data:`AUDIT_PAGE` entries, newest first. Its owners alone read them (the log names
    people and the addresses they came from): anyone else raises :class:`~console.errors.ReadOnly`, saying why
    (as a change they may not make)."""
    require_owner(account)
    return AuditEntry.objects.filter(subscription=account.subscription)[:AUDIT_PAGE]
