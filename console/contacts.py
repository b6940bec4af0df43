"""A subscription's e-mail contacts: add, change and delete them, mail a new confirmation link, and confirm one
by its link; the one implementation the API and the page both call.

A contact added here is sent nothing until its address confirms (:mod:`notifications.contacts`); so is one whose
address changes. Each change is checked (Django's ``ValidationError``, naming the field), made and written to the
audit log in one transaction; the confirmation e-mail leaves after that commits. Each confirmation mail is
counted in that transaction against its limits (:mod:`console.confirmations`): over one, nothing changes.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from rest_framework.request import Request

from notifications import contacts as mailing
from notifications.models import Contact

from . import audit, confirmations
from .access import Account
from .errors import Missing, StateConflict, field_errors
from .models import ConfirmationMail

NO_SUCH_CONTACT = "No such contact on this subscription."
CONFIRMED_ALREADY = "This address is confirmed already."


def contacts_of(account: Account) -> QuerySet[Contact]:
    """The subscription's contacts, oldest first."""
    return Contact.objects.filter(subscription=account.subscription).select_related("subscription").order_by("pk")


def contact_of(account: Account, contact_id: int) -> Contact:
    """Contact ``contact_id`` of the subscription; raises :class:`~console.errors.Missing` for any other."""
    contact = contacts_of(account).filter(pk=contact_id).first()
    if contact is None:
        raise Missing(NO_SUCH_CONTACT)
    return contact


def add_contact(
    request: Request | HttpRequest, account: Account, email: str, events: Any = None
) -> tuple[Contact, bool]:
    """A new, unconfirmed contact (``events``: types, None or []: all), mailed its confirmation link; it, and
    whether the mail server took the mail. Over a limit of the confirmation mails, nothing is added
    (:class:`~console.errors.MailLimitReached`)."""
    _check_email(email)
    with field_errors(), transaction.atomic():
        contact = mailing.add_contact(account.subscription, email, events)
        counted = confirmations.count_mail(account.subscription, contact.email)
        audit.record(request, account, "contact.create", contact.email, id=contact.pk, events=contact.events)
    return contact, send_confirmation(request, contact, counted)


def update_contact(
    request: Request | HttpRequest, account: Account, contact: Contact, changes: dict[str, Any]
) -> tuple[dict[str, Any], bool | None]:
    """Apply ``changes`` (any of ``email``, ``events``, ``is_active``): the fields that changed, with their new
    values, and whether a new address's confirmation mail was taken (None: the address did not change). A new
    address over a limit of the confirmation mails changes nothing (:class:`~console.errors.MailLimitReached`)."""
    if "email" in changes:
        _check_email(changes["email"])
    with field_errors(), transaction.atomic():
        changed = mailing.update_contact(contact, changes)
        counted = confirmations.count_mail(account.subscription, contact.email) if "email" in changed else None
        if changed:
            audit.record(request, account, "contact.update", contact.email, id=contact.pk, changed=changed)
    return changed, send_confirmation(request, contact, counted) if counted else None


def delete_contact(request: Request | HttpRequest, account: Account, contact: Contact) -> None:
    """Delete the contact."""
    with transaction.atomic():
        audit.record(request, account, "contact.delete", contact.email, id=contact.pk)
        contact.delete()


def resend_confirmation(request: Request | HttpRequest, account: Account, contact: Contact) -> bool:
    """Mail an unconfirmed contact a new link; whether the mail server took it. A confirmed one raises
    :class:`~console.errors.StateConflict`; one over a limit of the confirmation mails
    :class:`~console.errors.MailLimitReached`."""
    if contact.confirmed_at is not None:
        raise StateConflict(CONFIRMED_ALREADY)
    with transaction.atomic():
        counted = confirmations.count_mail(account.subscription, contact.email)
        audit.record(request, account, "contact.resend_confirmation", contact.email, id=contact.pk)
    return send_confirmation(request, contact, counted)


def confirm(request: Request | HttpRequest, token: str) -> Contact:
    """The contact a confirmation link's ``token`` confirms (audited the first time, its address the actor);
    ``ValidationError`` on ``token`` for a link forged, expired or of an address the contact no longer has."""
    with field_errors(), transaction.atomic():
        contact, now_confirmed = mailing.confirm(token, timezone.now())
        if now_confirmed:
            audit.record(request, Account(contact.subscription, None, None), "contact.confirm", contact.email,
                         by=f"{contact.email} (confirmation link)", id=contact.pk)  # fmt: skip
    return contact


def send_confirmation(request: Request | HttpRequest, contact: Contact, counted: ConfirmationMail) -> bool:
    """Mail ``contact`` its link (to the page's confirmation, on the host the request came to), ``counted`` by
    :func:`console.confirmations.count_mail`; whether the mail server took it (if not, the count is given back).
    Called once the change is committed. The link leads to a page with a button, not to the confirmation itself:
    mail scanners fetch links, and a fetch must not confirm an address nobody read."""
    url = request.build_absolute_uri(reverse("console-page:confirm"))
    sent = mailing.send_confirmation(contact, url)
    if not sent:
        confirmations.release(counted)
    return sent


def _check_email(email: Any) -> None:
    try:
        validate_email(email)
    except ValidationError as exc:
        raise ValidationError({"email": exc.messages}) from exc


__all__ = [
    "add_contact", "confirm", "contact_of", "contacts_of", "delete_contact", "resend_confirmation",
    "send_confirmation", "update_contact",
]  # fmt: skip
