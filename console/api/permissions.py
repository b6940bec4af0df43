"""The self-service API's one permission class: every console view's check of who may call it, before its
handler runs, so no handler has to remember one.

The rules are :mod:`console.access`'s; this class only asks them, and lets what they raise
(:class:`~console.errors.NotSignedIn`, :class:`~console.errors.NoSuchSubscription`,
:class:`~console.errors.ReadOnly`) reach the console's problem handler, which answers 401, 404 and 403
(:func:`console.problems.api_error`).
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from .. import access


class ConsoleAccess(BasePermission):
    """On a subscription's route (``subscription_id`` in the URL): reading (``GET``, ``HEAD``, ``OPTIONS``) is for
    the subscription's owners and members, signed in, and its own API keys; changing is for its owners, signed in.
    On any other route (the account): anyone signed in, or an API key (its ``OPTIONS``: anyone).

    The caller's standing is the view's ``account`` (:class:`console.api.base.ConsoleView`), looked up here once
    per request; the handler reads it."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if "subscription_id" not in view.kwargs:
            if request.method != "OPTIONS":  # which describes the route to anyone, as the confirmation's does
                access.signed_in(request.user)
            return True
        account = view.account  # raises for a caller with no role on the subscription
        if request.method not in SAFE_METHODS:
            access.require_owner(account)
        return True
