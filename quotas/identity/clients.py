"""Who is calling: API key, then authenticated user, then client IP.

The result is a :class:`Client` whose ``tag`` is the Redis hash tag of all
its keys. An API key that is sent but unknown, malformed or revoked is an
error (401), never silently treated as anonymous.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from quotas import problems
from quotas.contract.keys import client_tag
from quotas.exceptions import AuthThrottled, InvalidAPIKey
from quotas.identity.addresses import address_group
from quotas.identity.auth_failures import address_tag, failed_auth
from quotas.rules.snapshot import Subscriber
from quotas.runtime.rules_cache import RulesCache
from quotas.settings import quota_settings

logger = logging.getLogger(__name__)

MAX_API_KEY_LENGTH = 200


@dataclass(frozen=True, slots=True)
class Client:
    """The identity a decision is made for: a subscription (its API key's), a user, an address group, or a key
    a project counts by. ``tag`` names its counters (``{s.12}``, ``{u.7}``, ``{ip.203.0.113.9}``, ``{k.…}``);
    ``subscriber`` is what decides its plan, if anything does: its subscription, or a user's plan without one
    (a group plan, ``subscriber.id`` None). Made by :func:`identify`, or by the
    ``of_*`` constructors when a front door counts a request as another client."""

    kind: str  # "subscription", "user" or "ip"
    ident: str
    tag: str
    subscriber: Subscriber | None = None

    @property
    def subscription_id(self) -> int | None:
        """The id of the client's subscription (None for a user or an address without one)."""
        return self.subscriber.id if self.subscriber is not None else None

    # Each kind of client and the code of its tag ("{s.12}", "{u.7}", "{ip.203.0.113.9}", "{k.<key>}"), made
    # here only: every front door re-keys a request (a DRF get_cache_key, a decorator's key=) through these.

    @classmethod
    def of_subscription(cls, subscriber: Subscriber) -> Client:
        """The client a subscription is (its API key's)."""
        ident = str(subscriber.id)
        return cls("subscription", ident, client_tag("s", ident), subscriber)

    @classmethod
    def of_user(cls, pk: object, subscriber: Subscriber | None = None) -> Client:
        """A signed-in user (counted as such; ``subscriber`` keeps the plan of the client it was)."""
        ident = str(pk)
        return cls("user", ident, client_tag("u", ident), subscriber)

    @classmethod
    def of_address(cls, group: str, subscriber: Subscriber | None = None) -> Client:
        """An address group (an IPv4 address, an IPv6 network)."""
        return cls("ip", group, client_tag("ip", group), subscriber)

    @classmethod
    def of_key(cls, key: object, subscriber: Subscriber | None = None) -> Client:
        """A key a project chose to count by (a DRF cache key, a decorator's ``key=``); the plan stays the
        client's (``subscriber``)."""
        ident = str(key)
        return cls("key", ident, client_tag("k", ident), subscriber)


def hash_api_key(raw: str) -> str:
    """How API keys are stored and looked up: hex SHA-256 of the raw key.

    Keys are long random tokens, so a fast hash is enough; a slow password
    hash would put milliseconds on every request.
    """
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def identify(request: HttpRequest, user: Any, rules: RulesCache, auth: Any = None) -> Client:
    """The client of ``request``: its API key, else its user, else its address.

    ``auth`` is what authentication found (DRF's ``request.auth``): a
    :class:`Subscriber` from :class:`quotas.drf.authentication.APIKeyAuthentication`
    is the client. Without that class installed, a key in the header is checked
    here; raises :class:`InvalidAPIKey` for a bad key.
    """
    if isinstance(auth, Subscriber):
        return Client.of_subscription(auth)
    raw_key = api_key_of(request)
    if raw_key is not None and rules.backend is not None:
        return authenticate_key(request, raw_key, rules)
    if user is not None and getattr(user, "is_authenticated", False):
        pk = user.pk
        kept = rules.user_clients
        known = kept.get(pk)
        if known is not None:
            # Made since the last reload (which empties them), so its subscriber is this snapshot's: a busy user's
            # request looks up nothing else (bench-count, busy client, 1 limit: 688,247 -> 685,357 a request).
            return known
        generation = rules.generation
        client = user_client(pk, rules.subscriber_for_user(pk))  # of_user makes its str
        if generation == rules.generation:  # not across a reload: what was read before it may be stale
            if len(kept) >= USER_CLIENTS_MAX:
                kept.clear()  # a flood of new users: started afresh, rather than ordered and evicted
            kept[pk] = client
        return client
    group = address_group(request)
    return Client.of_address(group)


#: How many signed-in users' clients the rules cache keeps (RulesCache.user_clients).
USER_CLIENTS_MAX = 10_000


def api_key_of(request: HttpRequest) -> str | None:
    """The raw API key ``request`` sends in ``QUOTAS['API_KEY_HEADER']``, or None (none sent, or, with
    ``QUOTAS['API_KEY_PREFIXES']``, one that is not this platform's: the project's own authentication's)."""
    raw = request.META.get(quota_settings.api_key_meta)
    if raw is None:
        return None
    ours = quota_settings.API_KEY_PREFIXES
    if ours and not raw.strip().startswith(tuple(ours)):
        return None
    return raw


def user_client(pk: object, subscriber: Subscriber | None = None) -> Client:
    """The client of the signed-in user with primary key ``pk``, whose rules backend gave ``subscriber``.

    A user with a subscription is that subscription (``s.<id>``), sharing its counters with its API keys. Any
    other user is counted as themselves (``u.<pk>``): on the plan of a ``subscriber`` without an id (a plan
    from the user's groups), else (None) on the default plan.
    """
    if subscriber is not None and subscriber.id is not None:
        return subscription_client(subscriber)
    return Client.of_user(pk, subscriber)


def subscription_client(subscriber: Subscriber) -> Client:
    """The client of ``subscriber``."""
    return Client.of_subscription(subscriber)


def authenticate_key(request: HttpRequest, raw_key: str, rules: RulesCache) -> Client:
    """The client of API key ``raw_key``; while its address is blocked, only if the key may exist.

    Raises :class:`InvalidAPIKey` (401) for a malformed, unknown, revoked or
    expired key, counting the failure against the client address; and
    :class:`AuthThrottled` (429) for a key this platform does not know while
    the address is over ``QUOTAS['FAILED_AUTH_LIMITS']`` (see
    :mod:`quotas.identity.auth_failures`). Keys are 256-bit random tokens, so a
    valid key from a blocked address is not a lucky guess: it is answered on
    its merits, and one guesser cannot lock out every customer at its address.
    """
    # Parsing the address costs a little: only while some client is blocked, or after a failure.
    wait = failed_auth.wait(address_tag(request)) if failed_auth.blocking else 0
    if wait and not rules.may_know_key(hash_api_key(raw_key.strip())):
        # Refused without a database query: the guesser's stream costs nothing but this set lookup.
        raise AuthThrottled(problems.auth_throttled(wait), wait=wait)
    try:
        return _client_for_key(raw_key, rules)
    except InvalidAPIKey:
        wait = wait or failed_auth.record(address_tag(request))
        if not wait:
            raise
    raise AuthThrottled(problems.auth_throttled(wait), wait=wait)


def _client_for_key(raw_key: str, rules: RulesCache) -> Client:
    raw_key = raw_key.strip()
    if not raw_key or len(raw_key) > MAX_API_KEY_LENGTH or not raw_key.isascii() or not raw_key.isprintable():
        raise InvalidAPIKey(problems.invalid_api_key("malformed"))
    subscriber = rules.subscriber_for_key(hash_api_key(raw_key))
    if subscriber is None:
        raise InvalidAPIKey(problems.invalid_api_key("unknown"))
    if subscriber.revoked:
        raise InvalidAPIKey(problems.invalid_api_key("revoked"))
    if subscriber.key_expires_at is not None and subscriber.key_expires_at <= rules.clock.now():
        raise InvalidAPIKey(problems.invalid_api_key("expired"))
    return subscription_client(subscriber)
