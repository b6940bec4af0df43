"""What every self-service view shares: its throttle, its errors (problem+json), and the caller's account."""

from __future__ import annotations

from typing import Any

from rest_framework.generics import GenericAPIView
from rest_framework.renderers import JSONRenderer

from ..access import Account, account_for, require_owner
from ..problems import exception_handler
from ..throttling import CONSOLE_SCOPE, ConsoleThrottle


class ConsoleView(GenericAPIView):
    """A view of one subscription's resources, at ``subscriptions/<subscription_id>/...``.

    Authentication is the project's (API key, session with CSRF, basic auth); permissions are decided per
    request by :meth:`account` (read: owners, members and the subscription's own keys) and :meth:`owner`
    (change: owners, signed in), as :mod:`console.access` describes.
    """

    throttle_classes: list = [ConsoleThrottle]
    throttle_scope = CONSOLE_SCOPE
    permission_classes: list = []  # decided by account() and owner(), per subscription
    renderer_classes = [JSONRenderer]
    pagination_class = None

    def get_exception_handler(self) -> Any:
        return exception_handler

    def account(self) -> Account:
        """The caller's standing on the URL's subscription (401, or 404 for one that is not theirs)."""
        return account_for(self.request, int(self.kwargs["subscription_id"]))

    def owner(self) -> Account:
        """As :meth:`account`, and 403 unless the caller may change the subscription."""
        account = self.account()
        require_owner(account)
        return account
