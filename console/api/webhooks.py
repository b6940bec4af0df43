"""A subscription's webhook endpoints, under ``subscriptions/<id>/webhooks``: list, register, read, edit and
delete them, queue a test event for one, roll its secret, list its deliveries, read one and queue one again.

The actions are :mod:`console.webhooks`'s (:mod:`notifications.manage`'s operations, audited in the change's
transaction); these views parse the body and render the answer (who may act is
:class:`~console.api.permissions.ConsoleAccess`'s). A secret is shown once, in the answer that made it (register,
roll).
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers, status
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from notifications.models import Delivery, Endpoint

from .. import fields, webhooks
from ..access import Account
from ..schema import queued
from .base import ConsoleView, shown_once

#: Characters of a receiver's answer shown (the admin shows staff the 1,000 kept).
ANSWER_SHOWN = 200


class EndpointSerializer(serializers.ModelSerializer):
    """An endpoint as its subscription reads it: never its secret."""

    previous_secret_expires_at = serializers.DateTimeField(
        read_only=True, help_text="Until when the secret before the last roll signs too (null: it does not)."
    )

    class Meta:
        model = Endpoint
        fields = ["id", "url", "events", "description", "is_active", "disabled_reason", "consecutive_failures",
                  "previous_secret_expires_at", "created_at"]  # fmt: skip
        read_only_fields = fields


class EndpointInputSerializer(serializers.Serializer):
    """What an owner sends to register an endpoint (all of it) or edit one (any of it)."""

    url = serializers.URLField(help_text="https:// URL the events are POSTed to.", **fields.ENDPOINT_URL)
    events = serializers.ListField(child=serializers.CharField(), required=False, help_text="Event types; []: all.")
    description = serializers.CharField(required=False, allow_blank=True, **fields.DESCRIPTION)
    is_active = serializers.BooleanField(required=False, help_text="true again: its failures are forgotten.")


class RollSerializer(serializers.Serializer):
    overlap_seconds = serializers.IntegerField(
        help_text="How long the old secret signs beside the new one.", **fields.OVERLAP
    )


class DeliverySerializer(serializers.ModelSerializer):
    """One delivery as its subscription reads it: the kind of a failure (``error``), never its detail."""

    event = serializers.SerializerMethodField()
    response = serializers.SerializerMethodField(help_text=f"The first {ANSWER_SHOWN} characters of the answer.")
    error = serializers.SerializerMethodField(help_text="The kind of the last failure (docs/notifications.md).")
    error_description = serializers.SerializerMethodField(help_text="What that kind of failure is, in words.")

    class Meta:
        model = Delivery
        fields = ["id", "event", "status", "attempts", "response_status", "response", "error", "error_description",
                  "created_at", "last_attempt_at", "next_attempt_at"]  # fmt: skip
        read_only_fields = fields

    def get_event(self, delivery: Delivery) -> dict[str, str]:
        return {"id": str(delivery.event_id), "type": delivery.event.type}

    def get_response(self, delivery: Delivery) -> str:
        return delivery.response_body[:ANSWER_SHOWN]

    def get_error(self, delivery: Delivery) -> str | None:
        return delivery.failure or None

    def get_error_description(self, delivery: Delivery) -> str | None:
        return delivery.get_failure_display() if delivery.failure else None


class EndpointView(ConsoleView):
    """What the endpoint views share: the URL's endpoint (of the URL's subscription), and a body's validation."""

    serializer_class: type[serializers.Serializer] = EndpointSerializer
    lookup_url_kwarg = "endpoint_id"

    def endpoint(self, account: Account) -> Endpoint:
        return webhooks.endpoint_of(account, self.kwargs["endpoint_id"])

    def valid(self, serializer_class: type[serializers.Serializer], partial: bool = False) -> dict[str, Any]:
        data = serializer_class(data=self.request.data, partial=partial)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)


class WebhookListView(ListModelMixin, EndpointView):  # the mixin: the OpenAPI schema shows GET as a list
    """``GET``: the subscription's endpoints; ``POST {url, events, description}``: register one (owners), its
    secret in the answer, once."""

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response(self.get_serializer(webhooks.endpoints_of(self.account), many=True).data)

    def post(self, request: Request, subscription_id: int) -> Response:
        account = self.account
        given = self.valid(EndpointInputSerializer)
        endpoint, secret = webhooks.register_endpoint(
            request, account, given["url"], given.get("events"), given.get("description", "")
        )
        return shown_once({**self.get_serializer(endpoint).data, "secret": secret}, status.HTTP_201_CREATED)


class WebhookDetailView(EndpointView):
    """``GET``, ``PATCH {url, events, description, is_active}`` and ``DELETE`` one endpoint."""

    def get(self, request: Request, subscription_id: int, endpoint_id: int) -> Response:
        return Response(self.get_serializer(self.endpoint(self.account)).data)

    def patch(self, request: Request, subscription_id: int, endpoint_id: int) -> Response:
        account = self.account
        endpoint = self.endpoint(account)
        webhooks.update_endpoint(request, account, endpoint, self.valid(EndpointInputSerializer, partial=True))
        return Response(self.get_serializer(endpoint).data)

    def delete(self, request: Request, subscription_id: int, endpoint_id: int) -> Response:
        account = self.account
        webhooks.delete_endpoint(request, account, self.endpoint(account))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookTestView(EndpointView):
    """``POST``: queue a ``webhook.test`` event for the endpoint; 202 with its delivery, pending, at once.

    The dispatcher sends it at its next run (every few seconds, then up to ``QUOTAS['NOTIFICATIONS']['TIMEOUT']``
    for the receiver): poll the delivery at ``Location`` until its ``status`` is ``succeeded`` or ``failed``. One
    test at a time per endpoint: another while this one is pending is a 409.
    """

    serializer_class = DeliverySerializer

    @queued(DeliverySerializer, "The test's delivery, pending.", "The endpoint's last test is pending.", poll=True)
    def post(self, request: Request, subscription_id: int, endpoint_id: int) -> Response:
        account = self.account
        delivery = webhooks.send_test(request, account, self.endpoint(account))
        where = reverse("console:delivery", args=[account.subscription.pk, delivery.pk])
        body = self.get_serializer(delivery).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": where})


class WebhookRollSecretView(EndpointView):
    """``POST {overlap_seconds}``: a new secret now, in the answer once; the old one signs beside it until the
    overlap ends."""

    def post(self, request: Request, subscription_id: int, endpoint_id: int) -> Response:
        account = self.account
        endpoint = self.endpoint(account)
        secret = webhooks.roll_secret(request, account, endpoint, self.valid(RollSerializer)["overlap_seconds"])
        return shown_once({**self.get_serializer(endpoint).data, "secret": secret}, status.HTTP_200_OK)


class WebhookDeliveriesView(ListModelMixin, EndpointView):  # the mixin: a list in the OpenAPI schema
    """``GET``: the endpoint's latest deliveries (test events included), newest first."""

    serializer_class = DeliverySerializer

    def get(self, request: Request, subscription_id: int, endpoint_id: int) -> Response:
        latest = webhooks.deliveries_of(self.endpoint(self.account))
        return Response(self.get_serializer(latest, many=True).data)


class DeliveryDetailView(ConsoleView):
    """``GET``: one of the subscription's deliveries (to an endpoint or a contact), as it now is: where a test
    event's answer points, to poll until its ``status`` is no longer ``pending``."""

    serializer_class = DeliverySerializer
    lookup_url_kwarg = "delivery_id"

    def get(self, request: Request, subscription_id: int, delivery_id: int) -> Response:
        return Response(self.get_serializer(webhooks.delivery_of(self.account, delivery_id)).data)


class DeliveryResendView(ConsoleView):
    """``POST``: queue one of the subscription's deliveries again, due now; the dispatcher sends it within
    seconds (409 while it is pending already)."""

    serializer_class = DeliverySerializer
    lookup_url_kwarg = "delivery_id"

    @queued(DeliverySerializer, "The delivery, queued again.", "The delivery is pending already.")
    def post(self, request: Request, subscription_id: int, delivery_id: int) -> Response:
        account = self.account
        delivery = webhooks.resend_delivery(request, account, webhooks.delivery_of(account, delivery_id))
        return Response(self.get_serializer(delivery).data, status=status.HTTP_202_ACCEPTED)
