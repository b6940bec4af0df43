"""API keys as a DRF authentication class: ``request.user`` and ``request.auth`` the DRF way."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from quotas.drf.exceptions import drf_exception
from quotas.engine import default_engine
from quotas.exceptions import ProblemException
from quotas.identity.clients import api_key_of, authenticate_key
from quotas.rules.snapshot import Subscriber
from quotas.settings import quota_settings


class KeyHolder:
    """``request.user`` for a request authenticated by API key: the holder of the key's subscription.

    Authenticated, but neither staff nor any permission: what a key may do is
    its plan's business, not Django's permissions. No database query is made
    (the subscription comes from the in-process rules snapshot).
    """

    is_active = True
    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, subscriber: Subscriber) -> None:
        self.subscriber = subscriber

    @property
    def subscription_id(self) -> int:
        """The subscription the key belongs to."""
        assert self.subscriber.id is not None  # a key is always a subscription's (never a group plan's)
        return self.subscriber.id

    @property
    def plan_id(self) -> int:
        """The subscription's plan."""
        return self.subscriber.plan_id

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return False

    def has_perms(self, perm_list: Any, obj: Any = None) -> bool:
        return False

    def has_module_perms(self, app_label: str) -> bool:
        return False

    def get_username(self) -> str:
        return f"subscription-{self.subscriber.id}"

    def __str__(self) -> str:
        return f"API key of subscription {self.subscriber.id}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyHolder) and other.subscriber.id == self.subscriber.id

    def __hash__(self) -> int:
        return hash(("KeyHolder", self.subscriber.id))


class APIKeyAuthentication(BaseAuthentication):
    """Authenticates requests by the API key in ``QUOTAS['API_KEY_HEADER']`` (default ``X-API-Key``).

    Sets ``request.user`` to a :class:`KeyHolder` and ``request.auth`` to the
    key's :class:`~quotas.rules.snapshot.Subscriber`, which :class:`QuotaThrottle`
    counts against. A request without the header is left to the next class.
    A malformed, unknown, revoked or expired key raises
    :class:`~quotas.drf.exceptions.QuotaAuthenticationFailed` (401 with ``WWW-Authenticate``
    when this class is first in ``DEFAULT_AUTHENTICATION_CLASSES``; DRF
    answers 403 otherwise), and counts as a failed authentication.
    """

    def authenticate(self, request: Request) -> tuple[KeyHolder, Subscriber] | None:
        raw_key = api_key_of(request)  # DRF's request reads META from Django's
        if raw_key is None:
            return None
        rules = default_engine.runtime().rules
        if rules.backend is None:
            return None  # no rules backend, so no keys: the header means nothing here
        try:
            rules.current()  # reload a stale snapshot first: a reload empties the key cache the lookup fills
            client = authenticate_key(request, raw_key, rules)
        except ProblemException as exc:  # a bad key (401), a blocked address (429), the database down (503)
            raise drf_exception(exc) from None
        subscriber = client.subscriber
        assert subscriber is not None  # a key's client is its subscription
        return KeyHolder(subscriber), subscriber

    def authenticate_header(self, request: Request) -> str:
        return f'ApiKey header="{quota_settings.API_KEY_HEADER}"'
