"""The page's e-mail contacts section: add a contact (mailed its confirmation link), delete one."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from .. import contacts
from ..access import Account
from ..errors import MailLimitReached
from .forms import ContactForm, add_errors, problems
from .page import CONSEQUENCES, back, owner_action, render_page, unconfirmed


@owner_action
def add(request: HttpRequest, account: Account) -> HttpResponse:
    """Add a contact (``email``, ``events``), unconfirmed: it is mailed a link and nothing else until it follows
    it. Over a limit of the confirmation mails, nothing is added: 429 and the page says when to try again."""
    form = ContactForm(request.POST)
    if form.is_valid():
        try:
            contact, sent = contacts.add_contact(
                request, account, form.cleaned_data["email"], form.cleaned_data["events"]
            )
        except ValidationError as exc:
            add_errors(form, exc)
        except MailLimitReached as exc:  # nothing added: the form stays filled in for later
            response = render_page(request, account, status=429, failed=("contacts", [str(exc)]), contact_form=form)
            response["Retry-After"] = str(exc.wait)
            return response
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
    """Delete contact ``contact_id``, once confirmed (:func:`unconfirmed`)."""
    contact = contacts.contact_of(account, contact_id)
    asked = unconfirmed(
        request, account, "contacts", question=f"Delete the contact {contact.email}?",
        consequence=CONSEQUENCES["contact"], button="Delete this contact",
    )  # fmt: skip
    if asked is not None:
        return asked
    contacts.delete_contact(request, account, contact)
    messages.success(request, f"{contact.email} was deleted: it is sent nothing more.")
    return back(account, "contacts")


@require_http_methods(["GET", "POST"])
def confirm(request: HttpRequest) -> HttpResponse:
    """The link of a confirmation e-mail: GET shows a button (a mail scanner fetching the link confirms
    nothing), POST confirms. No sign-in: the token is the credential."""
    token = request.POST.get("token", "") if request.method == "POST" else request.GET.get("token", "")
    context: dict[str, Any] = {"token": token}
    if request.method == "POST":
        try:
            context["contact"] = contacts.confirm(request, token)
        except ValidationError as exc:
            context["error"] = " ".join(exc.messages)
            return render(request, "console/confirm.html", context, status=400)
    return render(request, "console/confirm.html", context)
