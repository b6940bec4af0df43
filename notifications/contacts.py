"""A subscription's own e-mail contacts: added unconfirmed, mailed one confirmation link, sent nothing else until
the address's owner follows it (so a customer cannot sign a stranger up for its e-mails).

The link carries a token signed with :mod:`django.core.signing` under a salt of its own (:data:`SALT`), naming
the contact, its address and when it was issued; it is good for :data:`CONFIRM_FOR` (judged against a ``now``
the caller passes, so tests move time without sleeping) and only while the contact still has that address.
Contacts made by staff in the admin, or by code, are confirmed when made (the model's default).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core import signing
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from plans.models import Subscription

from .conf import notification_settings
from .manage import Invalid, check_room, event_types
from .models import Contact

logger = logging.getLogger(__name__)

#: The confirmation token's own salt: a token signed for anything else never confirms an address.
SALT = "notifications.contact.confirm"
#: How long a confirmation link works.
CONFIRM_FOR = timedelta(days=7)
#: The fields of a contact its owner may change.
EDITABLE = ("email", "events", "is_active")

INVALID_LINK = "This confirmation link is not valid, or no longer: ask the subscription's owner for a new one."


def add_contact(subscription: Subscription, email: str, event_list: Any = None) -> Contact:
    """A new, unconfirmed contact of ``subscription``; raises :class:`Invalid` for an address it has already, or
    when it has as many contacts as ``MAX_CONTACTS`` allow (:func:`~notifications.manage.check_room`)."""
    wanted = event_types(event_list)
    try:
        with transaction.atomic():
            check_room(subscription, Contact)
            return Contact.objects.create(subscription=subscription, email=email, events=wanted, confirmed_at=None)
    except IntegrityError as exc:
        raise Invalid("email", "This address is a contact of the subscription already.") from exc


def update_contact(contact: Contact, changes: dict[str, Any]) -> dict[str, Any]:
    """Apply ``changes`` (of :data:`EDITABLE`) to ``contact``; the fields that changed, with their new values.

    A new address is unconfirmed until it follows its own link (send it with :func:`send_confirmation`)."""
    changed: dict[str, Any] = {}
    for name in EDITABLE:
        if name in changes:
            value = event_types(changes[name]) if name == "events" else changes[name]
            if value != getattr(contact, name):
                changed[name] = value
    for name, value in changed.items():
        setattr(contact, name, value)
    fields = list(changed)
    if "email" in changed:
        contact.confirmed_at = None
        fields.append("confirmed_at")
    if fields:
        try:
            with transaction.atomic():
                contact.save(update_fields=fields)
        except IntegrityError as exc:
            raise Invalid("email", "This address is a contact of the subscription already.") from exc
    return changed


def confirmation_token(contact: Contact, now: datetime | None = None) -> str:
    """The token of ``contact``'s confirmation link, issued ``now``."""
    issued = int((now or timezone.now()).timestamp())
    return signing.dumps({"contact": contact.pk, "email": contact.email, "issued": issued}, salt=SALT)


def send_confirmation(contact: Contact, confirm_url: str, now: datetime | None = None) -> bool:
    """E-mail ``contact`` its confirmation link (``confirm_url`` with ``?token=``); whether the mail server took
    it (a failure is logged: the contact stays, unconfirmed, and its owner may ask for another)."""
    link = f"{confirm_url}?{urlencode({'token': confirmation_token(contact, now)})}"
    name = contact.subscription.name
    text = (
        f"Someone who manages the subscription {name} asked to send notifications (budgets, bans, webhook "
        f"failures) to this address. To receive them, confirm within {CONFIRM_FOR.days} days:\n\n{link}\n\n"
        "If you did not expect this, ignore this e-mail: nothing will be sent to you."
    )
    sender_address = notification_settings.FROM_EMAIL or settings.DEFAULT_FROM_EMAIL
    try:
        send_mail(f"Confirm notifications for {name}", text, sender_address, [contact.email], fail_silently=False)
    except Exception:  # the mail server's failure must not lose the contact just saved
        logger.exception("notifications: could not send contact %s its confirmation", contact.pk)
        return False
    return True


def confirm(token: str, now: datetime | None = None) -> tuple[Contact, bool]:
    """The contact ``token`` confirms, and whether it was confirmed just now (False: it was already).

    Raises :class:`Invalid` (field ``token``) for a token that is forged, expired, or of an address the contact
    no longer has."""
    now = now or timezone.now()
    try:
        claim = signing.loads(token, salt=SALT)
        issued = datetime.fromtimestamp(int(claim["issued"]), UTC)
        contact_id, email = int(claim["contact"]), str(claim["email"])
    except (signing.BadSignature, KeyError, TypeError, ValueError) as exc:
        raise Invalid("token", INVALID_LINK) from exc
    if now - issued > CONFIRM_FOR:  # (issued a moment "after" now is another worker's clock: fine)
        raise Invalid("token", INVALID_LINK)
    contact = Contact.objects.select_related("subscription").filter(pk=contact_id, email=email).first()
    if contact is None:
        raise Invalid("token", INVALID_LINK)  # deleted, or its address changed since
    if contact.confirmed_at is not None:
        return contact, False
    # Conditional, so two clicks at once confirm (and are audited) once.
    confirmed = Contact.objects.filter(pk=contact.pk, confirmed_at__isnull=True).update(confirmed_at=now)
    contact.confirmed_at = now
    return contact, bool(confirmed)
