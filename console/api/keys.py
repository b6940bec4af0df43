"""A subscription's API keys, under ``subscriptions/<id>/keys``: list them, create one, revoke one, roll one.

A key's raw text is shown once, in the answer that made it (create, roll); the database keeps its hash only, and
no answer or audit entry holds either. Every change is written to the audit log in its own transaction. A key
stops working on the request path exactly at its ``expires_at`` (checked per request) and at its revocation
from the next rules refresh (every process within a second).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework import exceptions, serializers, status
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from plans.models import APIKey, KeyState

from ..access import Account
from ..audit import record
from ..conf import MAX_OVERLAP_SECONDS
from .base import ConsoleView


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
                  "last_used_from", "state", "rolled_to"]  # fmt: skip
        read_only_fields = fields


class CreateSerializer(serializers.Serializer):
    """What an owner sends to create a key."""

    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="When the key stops working; null: never."
    )

    def validate_expires_at(self, value: Any) -> Any:
        # A moment already past is a typo: the key would never work (as the admin and issue_key refuse it).
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("This moment is in the past: the key would never work.")
        return value


class RollSerializer(serializers.Serializer):
    """What an owner sends to roll a key."""

    overlap_seconds = serializers.IntegerField(
        min_value=0, max_value=MAX_OVERLAP_SECONDS, help_text="How long the old key works beside the new one."
    )
    name = serializers.CharField(
        max_length=100, required=False, allow_blank=True, help_text="The new key's name; the old one's if absent."
    )


class KeyView(ConsoleView):
    """What the key views share: the URL's subscription's keys (any other's: 404), and a body's validation."""

    serializer_class = KeySerializer
    lookup_url_kwarg = "key_id"

    def keys(self, account: Account) -> QuerySet[APIKey]:
        return APIKey.objects.filter(subscription=account.subscription)

    def key(self, account: Account, *, lock: bool = False) -> APIKey:
        """The URL's key of ``account``'s subscription; ``lock``: its row locked to the end of the transaction."""
        keys = self.keys(account)
        key = (keys.select_for_update() if lock else keys).filter(pk=self.kwargs["key_id"]).first()
        if key is None:
            raise exceptions.NotFound("No such API key on this subscription.")
        return key

    def valid(self, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
        data = serializer_class(data=self.request.data)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)

    def created(self, key: APIKey, raw: str, **more: Any) -> Response:
        """201 with the key and its raw text (the one time it is shown), and ``more``."""
        return Response({"key": raw, **self.get_serializer(key).data, **more}, status=status.HTTP_201_CREATED)


class KeyListView(ListModelMixin, KeyView):  # the mixin: the OpenAPI schema shows GET as a list
    """``GET``: the subscription's keys, newest first; ``POST {name, expires_at}``: create one (owners)."""

    def get(self, request: Request, subscription_id: int) -> Response:
        return Response(self.get_serializer(self.keys(self.account()), many=True).data)

    def post(self, request: Request, subscription_id: int) -> Response:
        account = self.owner()
        given = self.valid(CreateSerializer)
        with transaction.atomic():
            key, raw = APIKey.issue(account.subscription, name=given["name"], expires_at=given["expires_at"])
            record(request, account, "key.create", key.prefix, name=key.name, expires_at=_moment(key.expires_at))
        return self.created(key, raw)


class KeyRevokeView(KeyView):
    """``POST``: revoke the key now (owners); a revoked key stays as it was (200 either way)."""

    def post(self, request: Request, subscription_id: int, key_id: int) -> Response:
        account = self.owner()
        with transaction.atomic():
            key = self.key(account, lock=True)
            if key.revoked_at is None:
                key.revoke()
                record(request, account, "key.revoke", key.prefix, name=key.name)
        return Response(self.get_serializer(key).data)


class KeyRollView(KeyView):
    """``POST {overlap_seconds, name}``: a new key now (owners), its raw text in the answer once, with the old
    key as ``replaces``; the old one works for the overlap more (or until its own expiry, if sooner), then
    stops. A revoked, expired or already rolled key is refused (400, ``errors.key_id`` says which)."""

    def post(self, request: Request, subscription_id: int, key_id: int) -> Response:
        account = self.owner()
        given = self.valid(RollSerializer)
        overlap = given["overlap_seconds"]
        with transaction.atomic():
            old = self.key(account, lock=True)
            try:
                new, raw = old.roll(timedelta(seconds=overlap), given.get("name"))
            except ValueError as exc:
                raise exceptions.ValidationError({"key_id": [str(exc)]}) from exc
            record(request, account, "key.roll", old.prefix, name=old.name, new_key=new.prefix, new_name=new.name,
                   expires_at=_moment(old.expires_at), overlap_seconds=overlap)  # fmt: skip
        return self.created(new, raw, replaces=self.get_serializer(old).data)


def _moment(value: Any) -> str | None:
    """A moment as the audit log's detail (JSON) keeps it."""
    return value.isoformat() if value is not None else None
