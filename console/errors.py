"""What the console's actions raise besides Django's ``ValidationError`` (a value that cannot be accepted, naming
its field): each front door turns them into its own answer (the API's problem+json, the page's 404 or 409)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from notifications.manage import Invalid


class Missing(LookupError):
    """No such object on the subscription (a key, an endpoint, a contact, a delivery): the message says which.

    One of another subscription is missing too: its id says nothing about it."""


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
