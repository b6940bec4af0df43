"""Who may act on a subscription: :func:`account_for` finds the caller's standing, :func:`require_owner` guards
every change. The rules live here alone; the API (:class:`console.api.permissions.ConsoleAccess`) and the page
(:mod:`console.pages.guard`) only ask them and translate what they raise.

Read access: the subscription's owners and members (signed in, by session or basic auth), and its own API keys.
Changes: owners only, signed in; an API key never manages keys, endpoints, contacts, caps or members (a leaked
key must not be able to mint more keys or point the webhooks elsewhere). A subscription the caller has no role
on is missing (:class:`~console.errors.NoSuchSubscription`), as one that does not exist: its id says nothing
about it. These functions take the caller (``request.user``: a Django user, anonymous, or the
:class:`~quotas.drf.authentication.KeyHolder` of an API key) and raise :mod:`console.errors`' exceptions, which
know no HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plans.models import Subscription
from quotas.drf.authentication import KeyHolder

from .errors import NoSuchSubscription, NotSignedIn, ReadOnly
from .models import Membership, Role

NOT_YOURS = "No such subscription, or you have no role on it."
#: The role an API key has on its own subscription, as the account lists it.
KEY = "key"
KEY_READS = "An API key cannot manage its subscription: sign in as one of its owners to change it."
MEMBER_READS = "Members may read; only an owner of this subscription may change it."


@dataclass(frozen=True, slots=True)
class Account:
    """The caller's standing on one subscription: its role, and the Django user (None for an API key)."""

    subscription: Subscription
    role: str | None
    user: Any

    @property
    def is_owner(self) -> bool:
        """Whether the caller may change the subscription: one of its owners, signed in (never its API key)."""
        return self.user is not None and self.role == Role.OWNER

    @property
    def actor_name(self) -> str:
        """The caller as the audit log names them."""
        if self.user is None:
            return f"API key of subscription {self.subscription.pk}"
        return str(self.user.get_username())


def signed_in(user: Any) -> Any:
    """``user`` when it is a signed-in user or an API key's holder; raises :class:`~console.errors.NotSignedIn`."""
    if user is None or not user.is_authenticated:
        raise NotSignedIn()
    return user


def role_of(user: Any, subscription: Subscription) -> str | None:
    """``user``'s role on ``subscription``: its own user is an owner; else their membership's; else None."""
    if user is None or not user.is_authenticated or user.pk is None:
        return None
    if subscription.user_id == user.pk:
        return Role.OWNER
    return Membership.objects.filter(subscription=subscription, user=user).values_list("role", flat=True).first()


def roles_of(user: Any) -> list[tuple[Subscription, str]]:
    """Every subscription ``user`` has a role on, with the role, by name (an API key: its own, as :data:`KEY`);
    raises :class:`~console.errors.NotSignedIn` without credentials."""
    if isinstance(signed_in(user), KeyHolder):
        return [(_subscription(user.subscription_id), KEY)]
    own = {s.pk: (s, Role.OWNER.value) for s in Subscription.objects.filter(user=user).select_related("plan")}
    for membership in Membership.objects.filter(user=user).select_related("subscription__plan"):
        own.setdefault(membership.subscription_id, (membership.subscription, membership.role))
    return sorted(own.values(), key=lambda pair: (pair[0].name, pair[0].pk))


def account_for(user: Any, subscription_id: int) -> Account:
    """The caller's standing on subscription ``subscription_id``; raises :class:`~console.errors.NotSignedIn`
    without credentials, :class:`~console.errors.NoSuchSubscription` without a role on it."""
    if isinstance(user, KeyHolder):
        if user.subscription_id != subscription_id:
            raise NoSuchSubscription(NOT_YOURS)
        return Account(_subscription(subscription_id), None, None)
    signed_in(user)
    subscription = _subscription(subscription_id)
    role = role_of(user, subscription)
    if role is None:
        raise NoSuchSubscription(NOT_YOURS)
    return Account(subscription, role, user)


def require_owner(account: Account) -> Account:
    """``account``, when it may change its subscription (:attr:`Account.is_owner`); raises
    :class:`~console.errors.ReadOnly` saying why not."""
    if account.user is None:
        raise ReadOnly(KEY_READS)
    if not account.is_owner:
        raise ReadOnly(MEMBER_READS)
    return account


def _subscription(subscription_id: int) -> Subscription:
    subscription = Subscription.objects.select_related("plan").filter(pk=subscription_id).first()
    if subscription is None:
        raise NoSuchSubscription(NOT_YOURS)
    return subscription
