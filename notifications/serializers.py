"""Documents ``GET /api/v1/notifications`` in the OpenAPI schema (the body comes from notifications.summary)."""

from __future__ import annotations

from rest_framework import serializers

from .models import Delivery


class EndpointSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.URLField()
    events = serializers.ListField(child=serializers.CharField(), help_text="Event types sent here; []: all.")
    is_active = serializers.BooleanField()
    disabled_reason = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class EventRefSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The body's id: the same on every attempt.")
    type = serializers.CharField()
    created = serializers.DateTimeField()


class DeliverySummarySerializer(serializers.Serializer):
    event = EventRefSerializer()
    to = serializers.CharField(allow_null=True, help_text="The endpoint's URL or the contact's address.")
    status = serializers.ChoiceField(choices=("pending", "succeeded", "failed"))
    attempts = serializers.IntegerField()
    response_status = serializers.IntegerField(allow_null=True)
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True, help_text="None once succeeded or given up.")
    error = serializers.ChoiceField(
        choices=Delivery.Failure.choices, allow_null=True,
        help_text="The kind of the last attempt's failure, if it failed (the detail is in the admin).",
    )  # fmt: skip


class NotificationsSerializer(serializers.Serializer):
    endpoints = EndpointSummarySerializer(many=True)
    deliveries = DeliverySummarySerializer(many=True, help_text="The latest, newest first.")
