"""A subscription's e-mail contacts, under ``subscriptions/<id>/contacts``, and the confirmation link's landing,
``GET contacts/confirm?token=...`` (no sign-in: the address's owner follows it from the e-mail).

A contact added here is sent nothing until its address confirms (:mod:`notifications.contacts`); so is one whose
address is changed. These views check who may act, translate, and write the audit log in the change's
transaction; the confirmation e-mail leaves after that commits.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone
from rest_framework import exceptions, serializers, status
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from notifications import contacts, manage
from notifications.models import Contact

from ..access import Account
from ..audit import record
from .base import Conflict, ConsoleView


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

    email = serializers.EmailField(max_length=254)
    events = serializers.ListField(child=serializers.CharField(), required=False, help_text="Event types; []: all.")
    is_active = serializers.BooleanField(required=False)


def _invalid(exc: manage.Invalid) -> exceptions.ValidationError:
    return exceptions.ValidationError({exc.field: [exc.message]})


class ContactView(ConsoleView):
    """What the contact views share: the subscription's contacts (404 for any other's), and the confirmation."""

    serializer_class = ContactSerializer
    lookup_url_kwarg = "contact_id"

    def contacts(self, account: Account) -> QuerySet[Contact]:
        return Contact.objects.filter(subscription=account.subscription).select_related("subscription")

    def contact(self, account: Account) -> Contact:
        contact = self.contacts(account).filter(pk=self.kwargs["contact_id"]).first()
        if contact is None:
            raise exceptions.NotFound("No such contact on this subscription.")
        return contact

    def given(self, partial: bool = False) -> dict:
        data = ContactInputSerializer(data=self.request.data, partial=partial)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)

    def confirmation(self, contact: Contact) -> bool:
        """Mail ``contact`` its link once the change is committed; whether the mail server took it."""
        url = self.request.build_absolute_uri(reverse("console:contact-confirm"))
        return contacts.send_confirmation(contact, url)


class ContactListView(ListModelMixin, ContactView):  # the mixin: the OpenAPI schema shows GET as a list
    """``GET``: the subscription's contacts; ``POST {email, events}``: add one (owners), which is mailed a
    confirmation link and nothing else until it follows it."""

    def get(self, request: Request, subscription_id: int) -> Response:
        account = self.account()
        return Response(self.get_serializer(self.contacts(account).order_by("pk"), many=True).data)

    def post(self, request: Request, subscription_id: int) -> Response:
        account = self.owner()
        given = self.given()
        try:
            with transaction.atomic():
                contact = contacts.add_contact(account.subscription, given["email"], given.get("events"))
                record(request, account, "contact.create", contact.email, id=contact.pk, events=contact.events)
        except manage.Invalid as exc:
            raise _invalid(exc) from exc
        body = {**self.get_serializer(contact).data, "confirmation_sent": self.confirmation(contact)}
        return Response(body, status=status.HTTP_201_CREATED)


class ContactDetailView(ContactView):
    """``GET``, ``PATCH {email, events, is_active}`` (a new address confirms again) and ``DELETE`` one contact."""

    def get(self, request: Request, subscription_id: int, contact_id: int) -> Response:
        return Response(self.get_serializer(self.contact(self.account())).data)

    def patch(self, request: Request, subscription_id: int, contact_id: int) -> Response:
        account = self.owner()
        contact = self.contact(account)
        given = self.given(partial=True)
        try:
            with transaction.atomic():
                changed = contacts.update_contact(contact, given)
                if changed:
                    record(request, account, "contact.update", contact.email, id=contact.pk, changed=changed)
        except manage.Invalid as exc:
            raise _invalid(exc) from exc
        body = self.get_serializer(contact).data
        if "email" in changed:
            body = {**body, "confirmation_sent": self.confirmation(contact)}
        return Response(body)

    def delete(self, request: Request, subscription_id: int, contact_id: int) -> Response:
        account = self.owner()
        contact = self.contact(account)
        with transaction.atomic():
            record(request, account, "contact.delete", contact.email, id=contact.pk)
            contact.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class ContactResendConfirmationView(ContactView):
    """``POST``: mail an unconfirmed contact a new confirmation link (owners); 409 once it is confirmed."""

    def post(self, request: Request, subscription_id: int, contact_id: int) -> Response:
        account = self.owner()
        contact = self.contact(account)
        if contact.confirmed_at is not None:
            raise Conflict("This address is confirmed already.")
        with transaction.atomic():
            record(request, account, "contact.resend_confirmation", contact.email, id=contact.pk)
        return Response({**self.get_serializer(contact).data, "confirmation_sent": self.confirmation(contact)})


class ContactConfirmView(ConsoleView):
    """``GET ?token=...``: the link of a confirmation e-mail. No sign-in (whoever reads the mail follows it);
    answers ``{"confirmed": true, ...}``, or a 400 problem for a link forged, expired or of an address the
    contact no longer has."""

    authentication_classes: list = []  # the token is the credential
    serializer_class = ContactSerializer

    def get(self, request: Request) -> Response:
        try:
            with transaction.atomic():
                contact, now_confirmed = contacts.confirm(request.query_params.get("token", ""), timezone.now())
                if now_confirmed:
                    record(request, Account(contact.subscription, None, None), "contact.confirm", contact.email,
                           by=f"{contact.email} (confirmation link)", id=contact.pk)  # fmt: skip
        except manage.Invalid as exc:
            raise _invalid(exc) from exc
        return Response({"confirmed": True, "email": contact.email, "subscription": contact.subscription.name})
