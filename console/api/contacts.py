"""A subscription's e-mail contacts, under ``subscriptions/<id>/contacts``, and the confirmation link's landing,
``GET contacts/confirm?token=...`` (no sign-in: the address's owner follows it from the e-mail).

A contact added here is sent nothing until its address confirms (:mod:`notifications.contacts`); so is one whose
address is changed. The actions are :mod:`console.contacts`'s (audited in the change's transaction, the
confirmation e-mail sent after that commits); these views parse the body and render the answer (who may act is
:class:`~console.api.permissions.ConsoleAccess`'s). Each confirmation mail (of an added contact, a changed
address, a resend) is counted against its limits (:mod:`console.confirmations`): over one, the answer is a 429
naming it, with ``Retry-After``, and nothing changes.
"""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.mixins import ListModelMixin
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from notifications.models import Contact

from .. import contacts, fields
from ..access import Account
from .base import ConsoleView


class ContactSerializer(serializers.ModelSerializer):
    """A contact as its subscription reads it."""

    confirmed = serializers.SerializerMethodField(help_text="false: sent nothing until the address confirms.")

    class Meta:
        model = Contact
        fields = ["id", "email", "events", "is_active", "confirmed", "confirmed_at"]
        read_only_fields = fields

    def get_confirmed(self, contact: Contact) -> bool:
        return contact.confirmed_at is not None


class ContactInputSerializer(serializers.Serializer):
    """What an owner sends to add a contact (``email``, ``events``) or change one (any of them, ``is_active``)."""

    email = serializers.EmailField(**fields.EMAIL)
    events = serializers.ListField(child=serializers.CharField(), required=False, help_text="Event types; []: all.")
    is_active = serializers.BooleanField(required=False)


class ContactView(ConsoleView):
    """What the contact views share: the URL's contact (of the URL's subscription), and a body's validation."""

    serializer_class = ContactSerializer
    lookup_url_kwarg = "contact_id"

    def contact(self, account: Account) -> Contact:
        return contacts.contact_of(account, self.kwargs["contact_id"])

    def given(self, partial: bool = False) -> dict:
        data = ContactInputSerializer(data=self.request.data, partial=partial)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)


class ContactListView(ListModelMixin, ContactView):  # the mixin: the OpenAPI schema shows GET as a list
    """``GET``: the subscription's contacts; ``POST {email, events}``: add one (owners), which is mailed a
    confirmation link and nothing else until it follows it."""

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response(self.get_serializer(contacts.contacts_of(self.account), many=True).data)

    def post(self, request: Request, subscription_id: int) -> Response:
        account = self.account
        given = self.given()
        contact, sent = contacts.add_contact(request, account, given["email"], given.get("events"))
        body = {**self.get_serializer(contact).data, "confirmation_sent": sent}
        return Response(body, status=status.HTTP_201_CREATED)


class ContactDetailView(ContactView):
    """``GET``, ``PATCH {email, events, is_active}`` (a new address confirms again) and ``DELETE`` one contact."""

    def get(self, request: Request, subscription_id: int, contact_id: int) -> Response:
        return Response(self.get_serializer(self.contact(self.account)).data)

    def patch(self, request: Request, subscription_id: int, contact_id: int) -> Response:
        account = self.account
        contact = self.contact(account)
        _, sent = contacts.update_contact(request, account, contact, self.given(partial=True))
        body = self.get_serializer(contact).data
        if sent is not None:
            body = {**body, "confirmation_sent": sent}
        return Response(body)

    def delete(self, request: Request, subscription_id: int, contact_id: int) -> Response:
        account = self.account
        contacts.delete_contact(request, account, self.contact(account))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ContactResendConfirmationView(ContactView):
    """``POST``: mail an unconfirmed contact a new confirmation link (owners); 409 once it is confirmed, 429 within
    ``QUOTAS['CONSOLE']['CONFIRMATION_INTERVAL']`` of the address's last link."""

    def post(self, request: Request, subscription_id: int, contact_id: int) -> Response:
        account = self.account
        contact = self.contact(account)
        sent = contacts.resend_confirmation(request, account, contact)
        return Response({**self.get_serializer(contact).data, "confirmation_sent": sent})


class ConfirmSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="The token of the link the confirmation e-mail carried.")


class ContactConfirmView(ConsoleView):
    """``POST {"token": ...}``: confirm the address a confirmation e-mail's link was for. No sign-in (whoever
    reads the mail has the token); answers ``{"confirmed": true, ...}``, or a 400 problem for a token forged,
    expired or of an address the contact no longer has. A POST, not a GET: fetching a link (as mail scanners
    do) must not confirm an address; the link itself leads to the page's button (``console.pages.contacts``)."""

    authentication_classes: list = []  # the token is the credential
    permission_classes = [AllowAny]  # so anyone with it may send it
    serializer_class = ConfirmSerializer

    def post(self, request: Request) -> Response:
        given = self.get_serializer(data=request.data)
        given.is_valid(raise_exception=True)
        contact = contacts.confirm(request, given.validated_data["token"])
        return Response({"confirmed": True, "email": contact.email, "subscription": contact.subscription.name})
