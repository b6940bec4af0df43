"""What the operators' commands share: naming a client, the rules to read it with, and what to say when Redis
fails (``quota_status``, ``quota_reset``, ``quota_doctor``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import DatabaseError

from quotas.contract.keys import is_client_tag
from quotas.engine import default_engine
from quotas.exceptions import RulesUnavailable, ScriptFailed, StoreUnavailable
from quotas.formats.store_urls import describe, redacted
from quotas.identity.addresses import group_of
from quotas.identity.clients import Client, subscription_client, user_client
from quotas.rules.limits import Window
from quotas.rules.snapshot import RuleSet
from quotas.runtime import Runtime
from quotas.runtime.rules_cache import RulesCache
from quotas.settings import quota_settings

CLIENT_HELP = (
    "The client: a subscription (s.12 or subscription:12), a user by primary key (u.5 or user:5; a user with an "
    "active subscription is counted as that subscription, as requests are), or an address (ip.203.0.113.9 or "
    "203.0.113.9; an IPv6 address by its network, as limits group it). API keys count as their subscription: "
    "the admin shows a key's subscription id."
)
#: The longest primary key, subscription id or address text accepted (anything longer names no client).
_MAX_VALUE = 64


@dataclass(frozen=True, slots=True)
class Named:
    """The client an operator named, and how it was resolved when that is not obvious."""

    client: Client
    note: str = ""  # e.g. "user 5 has subscription 12: their requests count as s.12"

    @property
    def label(self) -> str:
        """The client's tag as operators write it (``s.12``, ``ip.203.0.113.9``)."""
        return self.client.tag.strip("{}")


def resolve_client(text: str, rules: RulesCache) -> Named:
    """The client ``text`` names, tagged exactly as the runtime tags its requests.

    Raises :class:`CommandError` for text that names no client, an unknown
    subscription, or a database that fails the lookup.
    """
    name = text.strip()
    if name.startswith("{") and name.endswith("}"):
        name = name[1:-1]
    for prefix in ("s.", "subscription:"):
        if name.startswith(prefix):
            return _subscription(name.removeprefix(prefix), rules, text)
    for prefix in ("u.", "user:"):
        if name.startswith(prefix):
            return _user(name.removeprefix(prefix), rules, text)
    address = name.removeprefix("ip.")
    if address.startswith("~") and is_client_tag("ip." + address):  # a tag from a list: an encoded IPv6 group
        return Named(Client("ip", address, "{ip." + address + "}"))
    ip = _address(address)
    if ip is None:
        raise CommandError(
            f"{text!r} names no client: use s.12 or subscription:12, u.5 or user:5, ip.203.0.113.9 or an address."
        )
    group = group_of(ip)
    return Named(Client.of_address(group))


def _subscription(value: str, rules: RulesCache, text: str) -> Named:
    if not value.isascii() or not value.isdigit() or len(value) > _MAX_VALUE:
        raise CommandError(f"{text!r}: a subscription id is a number (s.12).")
    lookup = getattr(rules.backend, "subscriber_for_subscription", None)
    if lookup is None:
        raise CommandError(
            f"{text!r}: the rules backend ({quota_settings.RULES_BACKEND or 'none'}) cannot look up a subscription "
            "by id (it has no subscriber_for_subscription)."
        )
    try:
        subscriber = lookup(int(value))
    except DatabaseError as exc:
        raise CommandError(f"Looking up subscription {value} failed: the database answered {exc}") from None
    if subscriber is None:
        raise CommandError(f"No subscription has id {value}.")
    note = "" if not subscriber.revoked else f"subscription {value} is inactive: its API keys are refused (401)"
    return Named(subscription_client(subscriber), note)


def _user(value: str, rules: RulesCache, text: str) -> Named:
    if not value or len(value) > _MAX_VALUE:
        raise CommandError(f"{text!r}: give a user's primary key (u.5).")
    if value.isascii() and value.isdigit():
        value = str(int(value))  # as str(user.pk) writes it: u.05 is user 5
    try:
        subscriber = rules.subscriber_for_user(value)
    except (ValueError, TypeError, ValidationError):  # not of the type of the user model's primary key
        raise CommandError(f"{text!r}: {value!r} is not a user's primary key.") from None
    except RulesUnavailable:
        raise CommandError(f"Looking up the subscription of user {value} failed: the database is down.") from None
    client = user_client(value, subscriber)
    if subscriber is None:
        return Named(client)
    if subscriber.id is None:
        return Named(client, f"user {value} has no subscription: their plan comes from their groups")
    return Named(client, f"user {value} has subscription {subscriber.id}: their requests count as s.{subscriber.id}")


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address, or the first address of a network (``2001:db8::/64``), or None."""
    if len(text) > _MAX_VALUE:
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    try:
        return ipaddress.ip_network(text, strict=False).network_address
    except ValueError:
        return None


def command_runtime() -> Runtime:
    """This process's runtime; :class:`CommandError` for a ``REDIS_URL`` no client can be built for (call it
    inside :func:`redis_errors`: a cluster none of whose startup nodes answers is a Redis failure)."""
    try:
        return default_engine.runtime()
    except ValueError as exc:  # the message never repeats the URL
        raise CommandError(f"QUOTAS['REDIS_URL'] is not usable: {exc}") from None


def current_rules(runtime: Runtime) -> RuleSet:
    """This process's rules snapshot; :class:`CommandError` while the database cannot give one."""
    try:
        return runtime.rules.current()
    except RulesUnavailable as exc:
        raise CommandError(f"The rules could not be loaded from the database: {exc.detail}") from None


def plan_windows(client: Client, rules: RuleSet) -> list[Window]:
    """Every window of ``client``'s plan as it applies to the client (overrides, own budgets), shadow included."""
    plan_id = client.subscriber.plan_id if client.subscriber is not None else rules.default_plan_id
    return [w for rule in rules.limits_for(plan_id, client.subscriber) for w in rule.windows]


def redis_location() -> str:
    """``REDIS_URL`` for a message: its passwords hidden, with its topology."""
    url = str(quota_settings.REDIS_URL)
    return f"{redacted(url)} ({describe(url)})"


def store_failure(exc: BaseException) -> str:
    """One line saying that Redis failed, naming where it is."""
    if isinstance(exc, ScriptFailed):
        return f"Redis at {redis_location()} answered with an error: {exc}"
    return f"Redis at {redis_location()} is unreachable: {exc}"


@contextmanager
def redis_errors() -> Iterator[None]:
    """Turn a Redis failure inside the block into a :class:`CommandError` naming the Redis URL."""
    try:
        yield
    except StoreUnavailable as exc:  # every call to Redis goes through the store, which raises only this
        raise CommandError(store_failure(exc)) from None
