"""What every self-service view shares: its throttle, its errors (problem+json), its ``OPTIONS`` answer, the
caller's account, and the answer that shows a secret once."""

from __future__ import annotations

from typing import Any

from django.utils.cache import add_never_cache_headers
from rest_framework import exceptions
from rest_framework.generics import GenericAPIView
from rest_framework.metadata import SimpleMetadata
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from ..access import Account, account_for, require_owner
from ..problems import exception_handler
from ..throttling import CONSOLE_SCOPE, ConsoleThrottle


class ConsoleMetadata(SimpleMetadata):
    """``OPTIONS`` on a console route, allowed as its ``GET`` is: on a subscription's route, 401 without
    credentials and 404 on a subscription that is not the caller's (its id says nothing); then the route's name,
    description and media types, and (``actions``) the bodies of its ``PUT`` and ``POST`` to those who may send
    them: owners, and anyone on a route that needs no sign-in (the confirmation's).

    DRF's own asks ``get_object()`` whether a ``PUT`` may change the URL's object; these views have no queryset
    (the console's actions look objects up per subscription), so that answered 500 to anyone."""

    def determine_metadata(self, request: Request, view: Any) -> dict[str, Any]:
        if "subscription_id" in view.kwargs:
            view.account()
        return super().determine_metadata(request, view)

    def determine_actions(self, request: Request, view: Any) -> dict[str, Any]:
        if "subscription_id" in view.kwargs:
            try:
                view.owner()
            except exceptions.APIException:
                return {}  # members and keys read: no body to describe
        methods = sorted({"PUT", "POST"} & set(view.allowed_methods))
        return {method: self.get_serializer_info(view.get_serializer()) for method in methods}


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
    metadata_class = ConsoleMetadata
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


def shown_once(body: dict[str, Any], status: int) -> Response:
    """The answer that carries a secret, shown this once (an API key's raw text, a webhook's signing secret):
    ``Cache-Control: no-store`` (Django's :func:`~django.utils.cache.add_never_cache_headers`), as the page's
    answer that shows one, so no browser or proxy cache keeps it."""
    response = Response(body, status=status)
    add_never_cache_headers(response)
    return response
