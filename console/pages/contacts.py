"""The page's e-mail contacts section: add a contact (mailed its confirmation link), delete one."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from .. import contacts
from ..access import Account
from .forms import ContactForm, add_errors, problems
from .page import back, owner_action, render_page


@owner_action
def add(request: HttpRequest, account: Account) -> HttpResponse:
    """Add a contact (``email``, ``events``), unconfirmed: it is mailed a link and nothing else until it follows
    it."""
    form = ContactForm(request.POST)
    if form.is_valid():
        try:
            contact, sent = contacts.add_contact(
                request, account, form.cleaned_data["email"], form.cleaned_data["events"]
            )
        except ValidationError as exc:
            add_errors(form, exc)
        else:
            if sent:
                messages.success(request, f"{contact.email} was added: it is sent nothing until it follows the "
                                 "link we mailed it.")  # fmt: skip
            else:
                messages.warning(request, f"{contact.email} was added, but its confirmation mail could not be "
                                 "sent: it is sent nothing until it confirms; try again later.")  # fmt: skip
            return back(account, "contacts")
    return render_page(request, account, status=400, failed=("contacts", problems(form)), contact_form=form)


@owner_action
def delete(request: HttpRequest, account: Account, contact_id: int) -> HttpResponse:
    """Delete contact ``contact_id``."""
    contact = contacts.contact_of(account, contact_id)
    contacts.delete_contact(request, account, contact)
    messages.success(request, f"{contact.email} was deleted: it is sent nothing more.")
    return back(account, "contacts")
