"""What the console's access checks and actions raise besides Django's ``ValidationError`` (a value that cannot be
accepted, naming its field): plain exceptions that know no HTTP. Each front door turns them into its own answer in
one place: the API in :mod:`console.problems` (problem+json), the page in :mod:`console.pages.guard`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from notifications.manage import Invalid


class Missing(LookupError):
    """No such object on the subscription (a key, an endpoint, a contact, a delivery): the message says which.

    One of another subscription is missing too: its id says nothing about it."""


class NotSignedIn(Exception):
    """No credentials (neither a signed-in user nor an API key): the API's 401, the page's sign-in."""


class NoSuchSubscription(Missing):
    """No such subscription, or the caller has no role on it: the two look alike (404), so a subscription's id says
    nothing about it to those it is not theirs."""


class ReadOnly(Exception):
    """The caller may read the subscription but not change it (a member, or its API key): the message says why;
    the API's and the page's 403."""


class StateConflict(Exception):
    """The object is not in a state that allows the change (the message says why): the API's 409."""


class MailLimitReached(Exception):
    """A confirmation mail over one of its limits (the message says which, and when to try again): nothing was
    changed or sent; the API's 429 with ``Retry-After``. ``limit`` describes the limit (``per``: ``address`` or
    ``subscription``, ``mails``, ``seconds``) and ``wait`` is the seconds until it admits one more."""

    def __init__(self, message: str, limit: dict[str, Any], wait: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.wait = wait


@contextmanager
def field_errors() -> Iterator[None]:
    """Raise the notifications' :class:`~notifications.manage.Invalid` as Django's ``ValidationError`` naming the
    same field, so every console action fails one way."""
    try:
        yield
    except Invalid as exc:
        if exc.field == NON_FIELD_ERRORS:  # of no one field (a limit reached)
            raise ValidationError(exc.message) from exc
        raise ValidationError({exc.field: [exc.message]}) from exc
