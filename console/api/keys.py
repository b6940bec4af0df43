"""A subscription's API keys, under ``subscriptions/<id>/keys``: list them, create one, revoke one, roll one.

The actions are :mod:`console.keys`'s (checked, made and audited in one transaction); these views parse the body
and render the answer (who may act is :class:`~console.api.permissions.ConsoleAccess`'s). A key's raw text is
shown once, in the answer that made it (create, roll); the database keeps its hash only, and no answer or audit
entry holds either. A key stops working on the request path exactly at its ``expires_at`` (checked per request)
and at its revocation from the next rules refresh (every process within a second).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from rest_framework import serializers, status
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from plans.models import APIKey, KeyState

from .. import fields, keys
from .base import ConsoleView, shown_once


class KeySerializer(serializers.ModelSerializer):
    """A key as its subscription reads it: never its hash, and its raw text only in the answer that made it."""

    state = serializers.ChoiceField(
        choices=KeyState.choices, read_only=True, help_text="revoked, else expired, else rolled, else active."
    )
    rolled_to: serializers.PrimaryKeyRelatedField[APIKey] = serializers.PrimaryKeyRelatedField(
        read_only=True, help_text="The id of the key that replaced this one, if it was rolled."
    )

    class Meta:
        model = APIKey
        fields = ["id", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at",
                  "last_used_from", "state", "rolled_to", "own_rates", "cap_period", "cap_amount"]  # fmt: skip
        read_only_fields = fields


class FutureExpiry:
    """The ``expires_at`` check create and roll share: the action's own, here too so a body with several bad
    fields is told of all of them at once."""

    def validate_expires_at(self, value: Any) -> Any:
        try:
            keys.check_expiry(value)
        except ValidationError as exc:
            raise serializers.ValidationError(exc.message_dict["expires_at"]) from None
        return value


class CreateSerializer(FutureExpiry, serializers.Serializer):
    """What an owner sends to create a key."""

    name = serializers.CharField(required=False, allow_blank=True, default="", **fields.KEY_NAME)
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="When the key stops working; null: never."
    )


class RollSerializer(FutureExpiry, serializers.Serializer):
    """What an owner sends to roll a key."""

    overlap_seconds = serializers.IntegerField(
        help_text="How long the old key works beside the new one.", **fields.OVERLAP
    )
    name = serializers.CharField(
        required=False, allow_blank=True, help_text="The new key's name; the old one's if absent.", **fields.KEY_NAME
    )
    # Absent or null keeps the old key's expiry: a roll never turns a time-limited key into a permanent one.
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, default=None,
        help_text="When the new key stops working; absent or null: when the old one would have (never, if it had "
        "no expiry).",
    )  # fmt: skip


class KeyView(ConsoleView):
    """What the key views share: the serializer, a body's validation and the answer that shows a raw key."""

    serializer_class = KeySerializer
    lookup_url_kwarg = "key_id"

    def valid(self, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
        data = serializer_class(data=self.request.data)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)

    def created(self, key: APIKey, raw: str, **more: Any) -> Response:
        """201 with the key and its raw text (the one time it is shown, never cached), and ``more``."""
        return shown_once({"key": raw, **self.get_serializer(key).data, **more}, status.HTTP_201_CREATED)


class KeyListView(ListModelMixin, KeyView):  # the mixin: the OpenAPI schema shows GET as a list
    """``GET``: the subscription's keys, newest first; ``POST {name, expires_at}``: create one (owners)."""

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response(self.get_serializer(keys.keys_of(self.account), many=True).data)

    def post(self, request: Request, subscription_id: int) -> Response:
        account = self.account
        given = self.valid(CreateSerializer)
        return self.created(*keys.create_key(request, account, given["name"], given["expires_at"]))


class KeyRevokeView(KeyView):
    """``POST``: revoke the key now (owners); a revoked key stays as it was (200 either way)."""

    def post(self, request: Request, subscription_id: int, key_id: int) -> Response:
        return Response(self.get_serializer(keys.revoke_key(request, self.account, key_id)).data)


class KeyRollView(KeyView):
    """``POST {overlap_seconds, name, expires_at}``: a new key now (owners), its raw text in the answer once,
    with the old key as ``replaces``; the old one works for the overlap more (or until its own expiry, if
    sooner), then stops. The new key expires at ``expires_at``, else when the old one would have. A revoked,
    expired or already rolled key is refused (400, ``errors.key_id`` says which), a past ``expires_at`` too."""

    def post(self, request: Request, subscription_id: int, key_id: int) -> Response:
        account = self.account
        keys.key_of(account, key_id)  # another subscription's key: 404 before the body is read
        given = self.valid(RollSerializer)
        old, new, raw = keys.roll_key(
            request, account, key_id, given["overlap_seconds"], given.get("name"), expires_at=given["expires_at"]
        )
        return self.created(new, raw, replaces=self.get_serializer(old).data)
