"""``GET /api/v1/account``: the subscriptions the caller has a role on (with the endpoints and contacts each may
have, at most); ``GET .../audit``: a subscription's log."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from notifications.conf import notification_settings

from .. import audit
from ..access import KEY, roles_of
from ..models import AuditEntry
from .base import ConsoleView


class SubscriptionRoleSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    plan = serializers.CharField(help_text="The plan's slug.")
    role = serializers.ChoiceField(choices=["owner", "member", KEY], help_text="key: the caller is its API key.")
    max_webhook_endpoints = serializers.IntegerField(
        help_text="Webhook endpoints it may register, at most (QUOTAS['NOTIFICATIONS']['MAX_ENDPOINTS'])."
    )
    max_contacts = serializers.IntegerField(
        help_text="E-mail contacts it may have, at most (QUOTAS['NOTIFICATIONS']['MAX_CONTACTS'])."
    )


class AccountView(ConsoleView):
    """The subscriptions the signed-in caller is an owner or member of (an API key: its own, as ``key``)."""

    serializer_class = SubscriptionRoleSerializer

    def get(self, request: Request) -> Response:
        rows = roles_of(request.user)
        most = {"max_webhook_endpoints": notification_settings.MAX_ENDPOINTS,
                "max_contacts": notification_settings.MAX_CONTACTS}  # fmt: skip
        data = [{"id": s.pk, "name": s.name, "plan": s.plan.slug, "role": role, **most} for s, role in rows]
        return Response(self.get_serializer(data, many=True).data)


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name")

    class Meta:
        model = AuditEntry
        fields = ["id", "created_at", "actor", "action", "target", "detail", "address"]


class AuditView(ConsoleView):
    """The subscription's audit log, newest first (its last :data:`~console.audit.AUDIT_PAGE` entries): owners
    only (:func:`console.audit.log_of` decides)."""

    serializer_class = AuditEntrySerializer

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response(self.get_serializer(audit.log_of(self.account), many=True).data)
